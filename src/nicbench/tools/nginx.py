"""nginx as the HTTPS study's server: configuration (pure), argv, error log.

nginx runs in the foreground (``daemon off``) under nicbench's control with
its own prefix, pid file and logs, so it never touches the distribution's
/etc/nginx or a system nginx.  The configuration follows seed 001's: sendfile,
keepalive, a TLS listener (``ssl_conf_command Options KTLS`` when kTLS is asked
for) and a plain-HTTP listener for the baseline.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import MinVersion

MIN_KTLS = MinVersion("nginx", (1, 19, 4), "asking OpenSSL for kernel TLS takes ssl_conf_command, new in nginx "
                                           "1.19.4 (or set ktls = false)")

# nginx's names for the TLS versions a plan gives as "1.2" / "1.3"
TLS_PROTOCOLS = {"1.2": "TLSv1.2", "1.3": "TLSv1.3"}


@dataclass(frozen=True)
class NginxConf:
    prefix: str                  # directory holding conf, logs, pid, certs, docroot
    address: str                 # the server's test address
    https_port: int
    http_port: int
    workers: str = "auto"        # "auto" or a count
    worker_connections: int = 4096
    tls_versions: tuple[str, ...] = ("1.2", "1.3")
    ciphers: str = "HIGH:!aNULL:!MD5"          # TLS 1.2 cipher list (seed 001's)
    ciphersuites: str | None = None            # TLS 1.3 suites, e.g. "TLS_AES_256_GCM_SHA384"
    ktls: bool = True
    sendfile: bool = True


def render(c: NginxConf) -> str:
    """The nginx.conf text (pure; tested against ``nginx -t``)."""
    protocols = " ".join(TLS_PROTOCOLS[v] for v in c.tls_versions)
    tls_cmds = []
    if c.ktls:
        tls_cmds.append("        ssl_conf_command Options KTLS;")
    if c.ciphersuites:
        tls_cmds.append(f"        ssl_conf_command Ciphersuites {c.ciphersuites};")
    extra = ("\n" + "\n".join(tls_cmds)) if tls_cmds else ""
    return f"""# written by nicbench: seed 001's server, run in the foreground under nicbench
daemon off;
master_process on;
worker_processes {c.workers};
pid {c.prefix}/nginx.pid;
error_log {c.prefix}/logs/error.log warn;
worker_rlimit_nofile {max(2 * c.worker_connections, 1024)};

events {{
    worker_connections {c.worker_connections};
}}

http {{
    default_type application/octet-stream;
    access_log off;
    sendfile {'on' if c.sendfile else 'off'};
    tcp_nopush on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    client_body_temp_path {c.prefix}/tmp/body;
    proxy_temp_path {c.prefix}/tmp/proxy;
    fastcgi_temp_path {c.prefix}/tmp/fastcgi;
    uwsgi_temp_path {c.prefix}/tmp/uwsgi;
    scgi_temp_path {c.prefix}/tmp/scgi;

    server {{
        listen {c.address}:{c.https_port} ssl;
        server_name nicbench;
        ssl_certificate {c.prefix}/cert.pem;
        ssl_certificate_key {c.prefix}/key.pem;
        ssl_session_cache shared:SSL:1m;
        ssl_session_timeout 5m;
        ssl_protocols {protocols};
        ssl_ciphers {c.ciphers};
        ssl_prefer_server_ciphers on;{extra}
        root {c.prefix}/www;
    }}

    server {{
        listen {c.address}:{c.http_port};
        server_name nicbench;
        root {c.prefix}/www;
    }}
}}
"""


def argv(prefix: str) -> list[str]:
    return ["nginx", "-p", prefix, "-c", f"{prefix}/nginx.conf", "-e", f"{prefix}/logs/error.log"]


def test_argv(prefix: str) -> list[str]:
    return argv(prefix) + ["-t", "-q"]


_LEVEL = re.compile(r"^\S+ \S+ \[(emerg|alert|crit|error|warn)\] \d+#\d+: (?:\*\d+ )?(.*)$")

# lines that mean the server, not the network, limited the test
LIMITS = ("worker_connections are not enough", "Too many open files", "could not allocate",
          "no live upstreams", "SSL_do_handshake() failed")


@dataclass(frozen=True)
class LogLine:
    level: str
    message: str

    @property
    def is_limit(self) -> bool:
        return any(k in self.message for k in LIMITS)


def parse_error_log(text: str) -> list[LogLine]:
    """``[level] pid#tid: message`` lines of nginx's error log."""
    out = []
    for line in text.splitlines():
        m = _LEVEL.match(line.strip())
        if m:
            out.append(LogLine(m.group(1), m.group(2).strip()))
    return out


def first_error(text: str) -> str | None:
    """The line that explains a failed start (``[emerg] bind() ... failed``)."""
    for ln in parse_error_log(text):
        if ln.level in ("emerg", "alert", "crit"):
            return ln.message
    for line in text.splitlines():          # nginx -t prints "nginx: [emerg] ..." on stderr
        if "[emerg]" in line or "[alert]" in line:
            return line.split("]", 1)[-1].strip()
    return None
