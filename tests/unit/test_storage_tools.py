"""fio JSON (recorded fio 3.33 against nbdkit), the storage plan, LUN assignment, line-rate block size."""

import pytest

from conftest import fixture_text
from nicbench.core.errors import InputError, ToolError
from nicbench.plan import parse_plan
from nicbench.records import Sample, TrialRecord, TrialSpec, make_tags
from nicbench.studies.storage.analysis import StoragePoint, line_rate_from, storage_trial
from nicbench.studies.storage.runner import assignment, interval_samples, target_argv
from nicbench.tools import fio


def load(name):
    return fio.parse(fixture_text("fio", "3.33", name))


def test_json_is_cut_out_of_the_engine_noise_and_jobs_are_per_lun():
    r = load("nbd_read_2luns_noise.json")            # "fio: connected to NBD server" lines before the JSON
    assert [j.name for j in r.jobs] == ["lun0", "lun1"] and not r.errors
    j = r.jobs[0]
    assert j.read.ios == 105904 and j.read.bytes == 433844224 and j.read.runtime_s == pytest.approx(2.001)
    assert j.write.ios == 0 and j.read.percentiles_ns["99"] > 0
    total = r.total("read")
    assert total.ios == 105904 + 107560 and total.iops == pytest.approx(52925.537231 + 53753.123438)


def test_group_reporting_and_mixed_read_write():
    [j] = load("nbd_rw_512_group.json").jobs           # --numjobs=2 --group_reporting: one entry
    assert j.read.ios and j.write.ios and j.read.bytes == pytest.approx(j.read.ios * 512, rel=1e-3)


def test_a_write_job_is_read_from_its_write_side_only():
    r = load("nbd_write_32k.json")                     # fio 3.33 -rw=write -bs=32k against nbdkit memory
    [j] = r.jobs
    assert j.read.ios == 0 and j.read.bytes == 0
    # io_bytes runs 15 IOs (iodepth 16 - 1) ahead of the completed-IO count: bytes and IOs are
    # fio's own figures, each kept as printed, never one derived from the other
    assert j.write.ios == 171720 and j.write.bytes == 5627412480 == (171720 + 15) * 32768
    assert j.write.runtime_s == pytest.approx(2.001) and j.write.iops == pytest.approx(85817.091454)
    assert r.total("write").bw_bytes == pytest.approx(j.write.bytes / 2.001, rel=1e-3)
    assert r.total("read").ios == 0


def test_a_refused_connection_is_an_error_line_with_no_io():
    r = load("nbd_refused.json")
    assert r.errors and "Connection refused" in r.errors[0]
    assert r.total("read").ios == 0


def test_no_json_at_all_is_a_tool_error():
    with pytest.raises(ToolError):
        fio.parse("fio: engine nbd not loadable\n")


def test_argv_one_job_per_lun():
    a = fio.argv([("lun0", "nbd://h:1"), ("lun2", "nbd://h:3")], op="readwrite", pattern="sequential",
                 block_size=4096, iodepth=16, numjobs=1, runtime=5, ramp=1)
    assert "--rw=rw" in a and "--rwmixread=50" in a and "--ramp_time=1" in a and "--direct=1" in a
    assert a[-4:] == ["--name=lun0", "--uri=nbd://h:1", "--name=lun2", "--uri=nbd://h:3"]


def test_luns_split_evenly_like_the_seed():
    a = assignment(48, ["i1", "i2", "i3", "i4"])
    assert all(len(v) == 12 for v in a.values()) and sorted(sum(a.values(), [])) == list(range(48))
    assert assignment(5, ["a", "b"]) == {"a": [0, 2, 4], "b": [1, 3]}
    assert target_argv(parse_plan(PLAN).study, "198.18.0.1", 3)[-3:] == ["memory", str(64 * 2**20), "allocator=malloc"]


PLAN = '''name = "s"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
kind = "storage"
luns = 4
lun_size = "64M"
block_sizes = ["512", "4K"]
'''


def test_storage_plans_are_checked():
    with pytest.raises(InputError) as e:
        parse_plan(PLAN.replace("luns = 4", "luns = 1"), "s.toml")
    assert "fewer than the 2 initiators" in e.value.one_line()
    with pytest.raises(InputError) as e:
        parse_plan(PLAN.replace('["512", "4K"]', '["1000"]'), "s.toml")
    assert "multiple of 512" in e.value.one_line()
    from nicbench.plan.matrix import trials
    assert [t.point for t in trials(parse_plan(PLAN, "s.toml"))] == ["read/bs512", "read/bs4K"]


def _pt(bs, frac):
    return StoragePoint(f"read/bs{bs}", "read", bs, 1, 0, 100 * frac, 1.0, 100.0, None, None, None, (), ())


def test_line_rate_is_reached_from_the_block_size_on_which_all_larger_stay_there():
    assert line_rate_from([_pt(512, 0.5), _pt(2048, 0.97), _pt(4096, 0.99)]) == {"read": 2048}
    assert line_rate_from([_pt(512, 0.96), _pt(2048, 0.5), _pt(4096, 0.99)]) == {"read": 4096}
    assert line_rate_from([_pt(512, 0.5)]) == {"read": None}


def test_iscsi_perf_seconds_recorded():
    from nicbench.tools import iscsi_perf
    secs = iscsi_perf.parse(fixture_text("iscsi-perf", "0.1", "seq_read_4k_m16.txt"))
    assert [(s.t, s.iops) for s in secs] == [(1, 98206), (2, 93139), (3, 97619)]
    assert iscsi_perf.measured(secs, ramp=1) == (93139 + 97619, 2)


@pytest.mark.parametrize("name, words", [("refused.txt", "Login Failed"), ("no_target.txt", "Target not found")])
def test_iscsi_perf_that_never_did_io_is_an_error_with_its_words(name, words):
    from nicbench.tools import iscsi_perf
    with pytest.raises(ToolError) as e:
        iscsi_perf.parse(fixture_text("iscsi-perf", "0.1", name))
    assert words in e.value.one_line()


def test_iscsi_only_reads_null_luns():
    base = PLAN.replace('kind = "storage"', 'kind = "storage"\ntarget = "iscsi"\nlun_kind = "null"')
    with pytest.raises(InputError) as e:
        parse_plan(base + 'ops = ["read", "write"]\n', "s.toml")
    assert "only reads" in e.value.one_line()
    with pytest.raises(InputError) as e:
        parse_plan(base.replace('lun_kind = "null"', 'lun_kind = "memory"'), "s.toml")
    assert "null LUNs" in e.value.one_line()
    from nicbench.tools import iscsi_perf
    a = iscsi_perf.argv("iscsi://h:3260/iqn.x:lun0/1", block_size=4096, queue=16, initiator="iqn.x:c1", seconds=3.5)
    assert a[:7] == ["timeout", "--foreground", "-s", "INT", "-k", "5", "3.5"]
    assert a[a.index("-b") + 1] == "8"


def test_iscsi_perf_clock_and_stalls():
    """Its clock prints (rt % 3600) / 60 : rt / 60 : rt % 60, and a line after a
    stall covers the whole gap since the previous one."""
    from nicbench.tools import iscsi_perf
    line = "{} - lba 1, iops current {} (1 MB/s), iops average 1 (1 MB/s), in_flight 16, busy 0\r"
    secs = iscsi_perf.parse(line.format("00:01:05", 100) + line.format("01:61:40", 10))
    assert [s.t for s in secs] == [65, 3700]
    stalled = iscsi_perf.parse(line.format("00:00:01", 100) + line.format("00:00:02", 100)
                               + line.format("00:00:05", 10))
    assert iscsi_perf.measured(stalled, ramp=1) == (100 * 1 + 10 * 3, 4)


def test_devices_need_their_transport_and_every_initiator():
    dev = PLAN.replace("luns = 4\n", "").replace('kind = "storage"', 'kind = "storage"\ntarget = "devices"')
    with pytest.raises(InputError) as e:
        parse_plan(dev + 'devices = { c1 = ["/dev/sdb"], c2 = ["/dev/sdb"] }\n', "s.toml")
    assert "study.transport" in e.value.one_line()
    with pytest.raises(InputError) as e:
        parse_plan(dev + 'transport = "iscsi"\ndevices = { c1 = ["/dev/sdb"] }\n', "s.toml")
    assert "every initiator" in e.value.one_line()
    p = parse_plan(dev + 'transport = "iscsi"\ndevices = { c1 = ["/dev/sdb", "/dev/sdc"], c2 = ["/dev/sdb"] }\n')
    assert p.study.luns == 3
    with pytest.raises(InputError) as e:
        parse_plan(PLAN + 'transport = "iscsi"\n', "s.toml")
    assert 'only for target = "devices"' in e.value.one_line()


def test_a_point_above_its_ceiling_is_flagged():
    assert _pt(4096, 1.03).above_ceiling and not _pt(4096, 1.004).above_ceiling and not _pt(4096, 0.5).above_ceiling


def test_status_reports_give_each_job_its_measured_readings():
    # recorded: two NBD LUNs, ramp 1 s, runtime 3 s, --status-interval=1: the first
    # report falls in the ramp (counts from the job's start), the last is the final document
    prog = fio.progress(fixture_text("fio", "3.33", "nbd_read_status_interval.json"))
    assert sorted(prog) == [("lun0#0", "read"), ("lun1#1", "read")]
    lun0 = prog[("lun0#0", "read")]
    assert [r.runtime_ms for r in lun0] == [998, 1999, 2999, 3001]
    assert lun0[-1].bytes == 487436288 == load("nbd_read_status_interval.json").jobs[0].read.bytes
    assert {r.anchor_ms for r in lun0[:3]} <= {1795406170658, 1795406170659}


def test_numjobs_clones_are_told_apart_and_mixed_ops_kept_apart():
    prog = fio.progress(fixture_text("fio", "3.33", "nbd_randrw_numjobs2_status_interval.json"))
    assert sorted(prog) == [("lun0#0", "read"), ("lun0#0", "write"), ("lun0#1", "read"), ("lun0#1", "write")]
    assert prog[("lun0#1", "write")][-1].bytes == 918487040


def test_interval_samples_add_up_to_each_jobs_total_on_its_own_timeline():
    text = fixture_text("fio", "3.33", "nbd_read_status_interval.json")
    out = interval_samples(fio.progress(text), "t1", "c1")
    for i, job in enumerate(load("nbd_read_status_interval.json").jobs):
        mine = sorted((x for x in out if x.tag("proc") == f"{job.name}#{i}"), key=lambda x: x.t_start)
        by = [x for x in mine if x.metric == "storage.bytes"]
        assert sum(x.value for x in by) == job.read.bytes
        assert sum(x.value for x in mine if x.metric == "storage.ios") == job.read.ios
        assert all(a.t_end == b.t_start for a, b in zip(by, by[1:], strict=False))       # no gap, no overlap
        assert by[-1].t_end - by[0].t_start == pytest.approx(job.read.runtime_s, abs=1e-6)
    # the earliest anchor: a report's time is taken after its counts
    assert min(x.t_start for x in out if x.tag("proc") == "lun0#0") == pytest.approx(1795406170.658)


def _job(proc: str, start: float, rates: list[float], step: float, host: str = "c1") -> list[Sample]:
    """A job's per-interval samples: ``rates`` MB/s over consecutive ``step`` s intervals."""
    out = []
    for k, r in enumerate(rates):
        a = start + k * step
        for metric, v in (("storage.bytes", r * 1e6 * step), ("storage.ios", r * 1e6 * step / 4096)):
            out.append(Sample("t1", metric, v, "bytes" if metric == "storage.bytes" else "count", a, a + step,
                              make_tags(host=host, op="read", side="initiator", proc=proc)))
    return out


def test_staggered_jobs_sharing_a_link_read_at_the_link_not_above_it():
    """The audit's 103 %: two jobs on a 100 MB/s link, the second starting
    0.05 s late.  The first runs alone (100 MB/s) until the second starts,
    then each gets 50 MB/s; the first ends 0.05 s early and the second has
    the link alone.  Summing each job's average over its own span says
    101.7 MB/s; the window they share, less one report interval at each end,
    says the link's 100."""
    step, d = 0.25, 0.05
    # job A: [0, 3]; its first interval holds 0.05 s alone (100) and 0.2 s shared (50)
    a = _job("lun0#0", 0.0, [(100 * d + 50 * (step - d)) / step] + [50.0] * 11, step)
    b = _job("lun1#1", d, [50.0] * 11 + [(50 * (step - d) + 100 * d) / step], step, host="c2")
    rec = TrialRecord(TrialSpec("t1", 0, "storage", "read/4096", 0, {"op": "read", "block_size": 4096}),
                      "ok", 0.0, 3.1, None, {})
    t = storage_trial(rec, a + b)
    sum_of_averages = sum(x.value for x in a + b if x.metric == "storage.bytes") / 1e6 / 3.0
    assert sum_of_averages == pytest.approx(101.67, abs=0.01)
    assert t.status == "ok" and t.mb_s == pytest.approx(100.0, rel=1e-9)
    assert t.per_initiator_mb_s == pytest.approx({"c1": 50.0, "c2": 50.0})
    assert t.window == pytest.approx((d + step, 3.0 - step))
    assert t.start_skew_s == pytest.approx(d)


def test_jobs_that_never_overlap_fail_the_point_rather_than_invent_a_window():
    a = _job("lun0#0", 0.0, [100.0] * 4, 0.25)
    b = _job("lun1#1", 1.2, [100.0] * 4, 0.25)
    rec = TrialRecord(TrialSpec("t1", 0, "storage", "read/4096", 0, {"op": "read", "block_size": 4096}),
                      "ok", 0.0, 3.1, None, {})
    t = storage_trial(rec, a + b)
    assert t.status == "failed" and "share no measured window" in t.error


def test_status_interval_is_an_eighth_of_the_run_between_100_ms_and_1_s():
    assert [fio.status_ms(d) for d in (1, 2, 3, 5, 8, 60)] == [100, 250, 400, 600, 1000, 1000]
    a = fio.argv([("lun0", "nbd://h:1")], op="read", pattern="random", block_size=4096, iodepth=1, numjobs=1,
                 runtime=5, ramp=1, status_ms=600)
    assert "--status-interval=600ms" in a
