"""The lab's SSH mode: an OpenSSH server in every lab host, so the whole SSH
path (keys, known_hosts, ControlMaster, remote process lifecycle) runs for
real on one machine.

Each host's sshd has its own host key, takes only the lab's client key,
listens on the host's namespace address, and runs in a private mount
namespace with a tmpfs ``/run`` (sshd needs ``/run/sshd``; the machine's
``/run`` is left alone), its own UTS name and an empty root ``.bashrc``
(this machine's is not part of a lab host).  The controller's ssh runs in
the switch's namespace, from an address the bridge gets for it: the last
address of the lab subnet.  Keys, known_hosts and configs live in
``/var/lib/nicbench/lab-ssh/<lab>/`` ($NICBENCH_SSH_DIR), removed with the
lab: not under /run, which each sshd sees as its own empty tmpfs.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ..core.errors import LabError, PreflightError, tail
from ..hosts.lease import lease_dir
from ..hosts.ssh import SshTarget, SshTransport, close_all, connected
from ..hosts.sshcheck import HostCheck, preflight
from ..hosts.transport import Transport
from .manager import Lab
from .sshkeys import ssh_dir

SSH_PORT = 22

_CONFIG = """ListenAddress {ip}:{port}
HostKey {hostkey}
AuthorizedKeysFile {authorized}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PidFile none
LogLevel ERROR
MaxStartups 200
MaxSessions 200
SetEnv TMPDIR={tmp}
"""


# Inside the sshd's own mount namespace: a private /run (sshd needs /run/sshd),
# its own hostname, and an empty file over root's ~/.bashrc: bash run by sshd
# reads it even for a command, and this machine's (pyenv init: 0.35 s of CPU)
# is not part of a lab host -- 64 logins would cost 22 s of the 2 shared CPUs.
# The host's lease directory (hosts.lease: $4, this machine's directory for the
# namespace, under /run) is kept through a bind mount at $5 (outside /run) and
# mounted as the host's /run/lock/nicbench: a lease taken over SSH and one taken
# through ``ip netns exec`` are one lock.
_SSHD_WRAP = ('mount --bind "$4" "$5" && mount -t tmpfs -o mode=755 nicbench-run /run && '
              'mkdir -p /run/sshd /run/lock/nicbench && mount --bind "$5" /run/lock/nicbench && hostname "$1" && '
              'h=$(getent passwd root | cut -d: -f6) && { [ ! -e "$h/.bashrc" ] || mount --bind "$3" "$h/.bashrc"; } '
              '&& exec /usr/sbin/sshd -D -e -f "$2"')


def _keygen(path: Path, comment: str) -> None:
    if not path.exists():
        r = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise LabError(f"ssh-keygen failed: {tail(r.stderr)}", where=str(path))


def host_key_line(d: Path, host: str, ip: str) -> str:
    kind, key = (d / host / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    return f"{ip} {kind} {key}\n"


def start(lab) -> dict[str, SshTarget]:
    """Keys, configs and one sshd per host of ``lab``; the targets to reach them."""
    if shutil.which("sshd") is None and not Path("/usr/sbin/sshd").exists():
        raise PreflightError("the lab's SSH mode needs OpenSSH's server (sshd)",
                             hint="apt-get install openssh-server (the set-up command in README.md does it)")
    d = ssh_dir(lab.spec.name)
    d.mkdir(parents=True, exist_ok=True)
    _keygen(d / "id_ed25519", f"nicbench-lab-{lab.spec.name}")
    shutil.copy(d / "id_ed25519.pub", d / "authorized_keys")
    sw = lab.spec.switch_ns
    ctl = controller_ip_of(lab)
    subprocess.run(["ip", "-n", sw, "addr", "replace", f"{ctl}/{lab.spec.hosts[0].prefix}", "dev", "br0"],
                   check=True, capture_output=True)
    known = ""
    started = []
    for h in lab.spec.hosts:
        hd = d / h.name
        hd.mkdir(exist_ok=True)
        _keygen(hd / "ssh_host_ed25519_key", f"{h.name}@nicbench-lab")
        (hd / "tmp").mkdir(exist_ok=True)      # the sessions' temporary files go with the lab
        (hd / "sshd_config").write_text(_CONFIG.format(ip=h.ip, port=SSH_PORT, hostkey=hd / "ssh_host_ed25519_key",
                                                       authorized=d / "authorized_keys", tmp=hd / "tmp"))
        known += host_key_line(d, h.name, h.ip)
        if not listening(lab, h.ip):          # a reused lab: only the hosts whose sshd is gone
            start_one(lab, h, hd)
            started.append(h)
    (d / "known_hosts").write_text(known)
    (d / "ssh_config").write_text(f"Host *\n  IdentityFile {d / 'id_ed25519'}\n  IdentitiesOnly yes\n"
                                  f"  UserKnownHostsFile {d / 'known_hosts'}\n  GlobalKnownHostsFile /dev/null\n")
    for h in started:
        wait_listening(lab, h.ip)
    return targets(lab)


def controller_ip_of(lab) -> str:
    """The switch's own address on the lab subnet: its last host address."""
    h = lab.spec.hosts[0]
    net = ipaddress.IPv4Network(f"{h.ip}/{h.prefix}", strict=False)
    return str(net.broadcast_address - 1)


def start_one(lab, h, hd: Path) -> subprocess.Popen:
    """sshd in host ``h``'s namespace, in the foreground, tracked with the lab's processes."""
    log = open(hd / "sshd.log", "ab")
    (hd / "bashrc").write_text("")
    leases = lease_dir(h.netns)
    leases.mkdir(parents=True, exist_ok=True)
    (hd / "lease").mkdir(exist_ok=True)
    p = subprocess.Popen(["ip", "netns", "exec", h.netns, "unshare", "--mount", "--propagation", "private", "--uts",
                          "sh", "-c", _SSHD_WRAP, "sshd-wrap", h.name, str(hd / "sshd_config"), str(hd / "bashrc"),
                          str(leases), str(hd / "lease")],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    log.close()
    lab.tracker.add(h.name, p.pid)
    return p


def listening(lab, ip: str) -> bool:
    """Does something accept TCP connections on the host's SSH port (tried from the switch)?"""
    r = subprocess.run(["ip", "netns", "exec", lab.spec.switch_ns, "timeout", "1", "bash", "-c",
                        f"exec 3<>/dev/tcp/{ip}/{SSH_PORT}"], capture_output=True)
    return r.returncode == 0


def wait_listening(lab, ip: str, timeout: float = 10.0) -> None:
    """Until the host's sshd accepts TCP connections."""
    by = time.monotonic() + timeout
    while time.monotonic() < by:
        if listening(lab, ip):
            return
        time.sleep(0.05)
    raise LabError(f"sshd on {ip} did not start listening within {timeout:g}s", where=f"lab {lab.spec.name}")


def targets(lab) -> dict[str, SshTarget]:
    d = ssh_dir(lab.spec.name)
    return {h.name: SshTarget(dest=f"root@{h.ip}", config=str(d / "ssh_config"),
                              prefix=("ip", "netns", "exec", lab.spec.switch_ns), connect_timeout=5)
            for h in lab.spec.hosts}




class SshLab:
    """The lab with its hosts reached over SSH (the Hosts protocol): the same
    spec, tracker and restore files as the netns lab, its transports the SSH
    ones."""

    kind = "lab-ssh"
    shared_machine = True

    def __init__(self, lab: Lab, transports: dict[str, SshTransport], checks: dict[str, HostCheck]):
        self.lab = lab
        self.spec, self.tracker, self._t, self._checks = lab.spec, lab.tracker, transports, checks

    @property
    def checks(self) -> Mapping[str, HostCheck]:
        return self._checks

    def transport(self, host: str) -> Transport:
        return self._t[host]

    def transports(self) -> dict[str, Transport]:
        return dict(self._t)

    def restore_id(self, host: str) -> str:
        return self.lab.restore_id(host)

    def close(self) -> None:
        """The sessions end (their remote watchdogs fire), then what the lab tracked is killed."""
        close_all(self._t)
        self.lab.close()


def ssh_lab(lab: Lab, *, max_offset: float = 0.05,
            before_check: Callable[[dict[str, Transport]], None] | None = None) -> SshLab:
    """Start the lab's sshds (unless running), connect to every host and run
    the SSH preflight (``before_check``, the run's host leases, once every host
    is connected).  PreflightError lists every problem of every host at once."""
    targets_ = start(lab)             # keys and sshds made only where missing
    ts = {h: SshTransport(h, t, lab.tracker) for h, t in targets_.items()}
    want: dict[str, dict[str, tuple[str | None, int | None]]] = {
        h.name: {h.ifname: (h.ip, lab.spec.mtu)} for h in lab.spec.hosts}
    try:
        if before_check is not None and connected(ts):
            before_check(dict(ts))
    except BaseException:
        close_all(ts)
        raise
    checks, problems = preflight(ts, want, max_offset=max_offset)
    if problems:
        close_all(ts)
        raise PreflightError("; ".join(problems), where="ssh to the lab's hosts",
                             hint="fix every item listed, then run again")
    return SshLab(lab, ts, checks)
