"""One measurement per GPU, machine-wide (lmstudy.launch), on the CPU with fake GPU indices.

The GPUs are named by LMSTUDY_GPUS; on this machine there is no nvidia-smi,
so they are taken as they are. The leases are real flock(2) locks in a
lease directory of the test's own.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest

from lmstudy.analyse import study_cost
from lmstudy.launch import cpu_placement, gpu_lease
from lmstudy.sections.cost import section as cost

from .conftest import REPO, job_spans, lease_env, new_workdir, path_without_nvidia_smi, snakemake

LEASE = [sys.executable, str(REPO / "scripts" / "gpu_lease.py"), "--"]
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gpu" / "lease"


def line_of(stream, timeout: float = 120) -> str:
    """The next line a child writes, failing (not hanging) if none comes."""
    ready, _, _ = select.select([stream], [], [], timeout)
    assert ready, f"no line within {timeout} s"
    return stream.readline()


def holder(env: dict[str, str]) -> subprocess.Popen:
    """A leased job that holds its GPU until its stdin is closed; returns once it holds it."""
    job = subprocess.Popen(
        [*LEASE, sys.executable, "-c", "import sys; sys.stdin.read()"],
        env=env, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    line = line_of(job.stderr)
    assert line.startswith("gpu lease: GPU"), line
    return job


# -- choosing GPUs and cores -------------------------------------------------------------------


def test_each_gpu_gets_its_own_equal_share_of_the_cores():
    cores = list(range(16))
    shares = [cpu_placement.core_share(cores, slot, 4) for slot in range(4)]
    assert shares == [list(range(4 * i, 4 * i + 4)) for i in range(4)]
    assert cpu_placement.core_share(cores, 0, 1) == cores
    # Fewer cores than GPUs: one core each, shared round the cores.
    assert cpu_placement.core_share([0, 1], 2, 3) == [0]
    assert cpu_placement.cores_text([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"


def test_the_pool_is_every_listed_gpu_narrowed_as_the_user_asks():
    listed = gpu_lease.gpus_of(gpu_lease.parse_csv("0, GPU-aaa\n1, GPU-bbb\n2, GPU-ccc\n"))
    assert [g.index for g in gpu_lease.pool({}, listed)] == ["0", "1", "2"]
    assert [g.uuid for g in gpu_lease.pool({"CUDA_VISIBLE_DEVICES": "2,0"}, listed)] == ["GPU-aaa", "GPU-ccc"]
    assert [g.index for g in gpu_lease.pool({"CUDA_VISIBLE_DEVICES": "GPU-bbb"}, listed)] == ["1"]
    # LMSTUDY_GPUS names them by index; the job then sees its GPU by UUID.
    chosen = gpu_lease.pool({"LMSTUDY_GPUS": "1"}, listed)
    assert chosen == [gpu_lease.Gpu("1", "GPU-bbb")] and chosen[0].visible_as == "GPU-bbb"
    assert gpu_lease.pool({}, []) == []


def test_processes_not_ours_on_the_leased_gpu_are_named():
    apps = gpu_lease.parse_csv(
        "GPU-aaa, 4242, /usr/bin/python3, 1500\nGPU-bbb, 777, /opt/other, 20\nGPU-aaa, 99, /bin/ours, 10\n"
    )
    gpu = gpu_lease.Gpu("0", "GPU-aaa")
    assert gpu_lease.foreign_processes(gpu, ours={99}, apps=apps) == "pid 4242 python3 (1500 MiB)"
    assert gpu_lease.foreign_processes(gpu, ours={99, 4242}, apps=apps) == ""


def test_the_pool_and_neighbours_of_a_real_four_gpu_node():
    listed = gpu_lease.gpus_of(gpu_lease.parse_csv((FIXTURES / "query_gpu.txt").read_text()))
    assert [g.index for g in listed] == ["0", "1", "2", "3"]
    assert all(g.uuid.startswith("GPU-") and len(g.uuid) == 40 for g in listed)
    assert gpu_lease.pool({"CUDA_VISIBLE_DEVICES": "3"}, listed) == [listed[3]]
    apps = gpu_lease.parse_csv((FIXTURES / "compute_apps.txt").read_text())
    # The process not of the study sat on GPU 0; a job of ours (pid 13816) did too.
    assert gpu_lease.foreign_processes(listed[0], ours={13816}, apps=apps) == "pid 13359 python3 (1542 MiB)"
    assert gpu_lease.foreign_processes(listed[1], ours=set(), apps=apps) == ""


def test_section_8_of_a_real_run_on_four_gpus_says_four_ran_at_once():
    jobs = pd.read_csv(FIXTURES / "qall_jobs.csv")  # as the cost section reads it: GPU indices as numbers
    assert study_cost.most_at_once(jobs[jobs["measuring"]]) == 4
    assert study_cost.overlaps_on_one_gpu(jobs[jobs["measuring"]]).empty
    said = " ".join(cost.concurrency_findings(jobs))
    assert "at most 4 at once, on 4 GPUs (0, 1, 2, 3)" in said
    per_gpu = cost.by_gpu(jobs)
    assert list(per_gpu["GPU (index)"]) == ["0", "1", "2", "3"]
    assert per_gpu["jobs"].sum() == jobs["measuring"].sum()


# -- the lease itself ----------------------------------------------------------------------------


def test_a_job_sees_only_its_gpu_and_records_the_lease(tmp_path):
    env = lease_env(tmp_path, "5")
    shown = subprocess.run(
        [*LEASE, sys.executable, "-c",
         "import os, json; print(json.dumps({k: v for k, v in os.environ.items()"
         " if k.startswith(('LMSTUDY_', 'CUDA_'))}))"],
        env=env, capture_output=True, text=True, check=True,
    )
    seen = json.loads(shown.stdout)
    assert seen["CUDA_VISIBLE_DEVICES"] == "5"
    assert seen["LMSTUDY_GPU_INDEX"] == "5" and seen["LMSTUDY_GPU_SOURCE"] == "lease"
    assert float(seen["LMSTUDY_GPU_WAITED_S"]) < 5
    assert "gpu lease: GPU 5" in shown.stderr
    assert (tmp_path / "leases" / "gpu-5.lock").exists()


def test_two_processes_never_hold_one_lease(tmp_path):
    """Twelve jobs on two GPUs: each marks its GPU taken with O_EXCL, which fails if another holds it."""
    env = lease_env(tmp_path, "0,1")
    marks = tmp_path / "marks"
    marks.mkdir()
    job = (
        "import os, sys, time\n"
        f"mark = os.path.join({str(marks)!r}, os.environ['CUDA_VISIBLE_DEVICES'])\n"
        "fd = os.open(mark, os.O_CREAT | os.O_EXCL | os.O_WRONLY)\n"
        "time.sleep(0.2)  # hold the GPU for a while, as a job does\n"
        "os.close(fd); os.unlink(mark)\n"
        "print(os.environ['CUDA_VISIBLE_DEVICES'])\n"
    )

    # Both GPUs are held when the twelve start: each says it waits, then they take turns.
    held = [holder(env), holder(env)]
    jobs = [
        subprocess.Popen([*LEASE, sys.executable, "-c", job], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(12)
    ]
    assert all("waiting for one" in line_of(j.stderr) for j in jobs)
    for job in held:
        job.stdin.close()
        assert job.wait(timeout=30) == 0
    done = [j.communicate(timeout=300) for j in jobs]
    failed = [err for (_, err), j in zip(done, jobs, strict=True) if j.returncode]
    assert not failed, failed
    assert {out.strip() for out, _ in done} == {"0", "1"}


def test_a_job_waits_while_every_gpu_is_leased_and_says_so(tmp_path):
    env = lease_env(tmp_path, "0")
    first = holder(env)
    ran = tmp_path / "ran"
    second = subprocess.Popen(
        [*LEASE, sys.executable, "-c", f"open({str(ran)!r}, 'w').close()"],
        env=env, stderr=subprocess.PIPE, text=True,
    )
    said = line_of(second.stderr)
    assert "all 1 GPU(s) are leased" in said and "GPU 0: pid" in said and "waiting" in said
    assert not ran.exists() and second.poll() is None
    first.stdin.close()
    assert first.wait(timeout=30) == 0
    assert "GPU 0 is free after" in line_of(second.stderr)
    assert second.wait(timeout=30) == 0 and ran.exists()


SHOW_GPUS = "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['LMSTUDY_GPU_INDEX'])"


def test_a_job_of_several_gpus_leases_them_all_at_once(tmp_path):
    """gpu=2 (LMSTUDY_GPU_COUNT): two GPUs, both locked for the job's life, both visible to it."""
    env = {**lease_env(tmp_path, "0,1,2"), "LMSTUDY_GPU_COUNT": "2"}
    first = subprocess.Popen([*LEASE, sys.executable, "-c", f"{SHOW_GPUS}; import sys; sys.stdin.read()"],
                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    assert line_of(first.stdout).split() == ["0,1", "0,1"]
    # The third GPU alone is free: a one-GPU job gets it, a second two-GPU job waits for two.
    single = subprocess.run([*LEASE, sys.executable, "-c", SHOW_GPUS], env={**env, "LMSTUDY_GPU_COUNT": "1"},
                            capture_output=True, text=True, check=True, timeout=60)
    assert single.stdout.split() == ["2", "2"]
    second = subprocess.Popen([*LEASE, sys.executable, "-c", SHOW_GPUS], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    assert "fewer than 2 of the 3 GPU(s) are free; waiting for 2 at once" in line_of(second.stderr)
    assert second.poll() is None
    first.stdin.close()
    assert first.wait(timeout=30) == 0
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0 and "2 GPUs are free after" in err
    assert out.split() == ["0,1", "0,1"]


def test_a_job_needing_more_gpus_than_the_machine_has_says_so(tmp_path):
    env = {**lease_env(tmp_path, "0,1"), "LMSTUDY_GPU_COUNT": "4"}
    ran = subprocess.run([*LEASE, sys.executable, "-c", "print('ran')"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode != 0 and "ran" not in ran.stdout
    assert ran.stderr.strip().splitlines() == [
        "error: this job needs 4 GPUs at once and this machine's pool has 2 (0, 1): run it on a node with 4 "
        "GPUs, or lower the section's world sizes in the config"
    ]


def test_a_job_of_no_gpu_takes_no_lease(tmp_path):
    env = {**lease_env(tmp_path, "0"), "LMSTUDY_GPU_COUNT": "0"}
    source = "import os; print(os.environ['LMSTUDY_GPU_SOURCE'])"
    shown = subprocess.run([*LEASE, sys.executable, "-c", source],
                           env=env, capture_output=True, text=True, check=True, timeout=60)
    assert shown.stdout.strip() == "none" and not (tmp_path / "leases" / "gpu-0.lock").exists()


def test_a_lease_is_released_when_its_job_is_killed(tmp_path):
    env = lease_env(tmp_path, "0")
    first = holder(env)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    after = subprocess.run(
        [*LEASE, sys.executable, "-c", "import os; print(os.environ['LMSTUDY_GPU_WAITED_S'])"],
        env=env, capture_output=True, text=True, timeout=60, check=True,
    )
    assert "waiting" not in after.stderr and float(after.stdout) < 5


def test_under_slurm_the_schedulers_gpu_is_used_as_it_is(tmp_path):
    env = {**lease_env(tmp_path, "0,1"), "SLURM_JOB_ID": "17", "CUDA_VISIBLE_DEVICES": "3"}
    shown = subprocess.run(
        [*LEASE, sys.executable, "-c",
         "import os; print(os.environ['CUDA_VISIBLE_DEVICES'], os.environ['LMSTUDY_GPU_SOURCE'])"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert shown.stdout.split() == ["3", "slurm"]
    assert not (tmp_path / "leases").exists()


def test_a_slurm_allocation_of_several_gpus_is_shared_through_leases(tmp_path):
    """salloc --gpus=2, then Snakemake runs the jobs itself: they still need a lease each."""
    env = {**lease_env(tmp_path, ""), "SLURM_JOB_ID": "17", "CUDA_VISIBLE_DEVICES": "0,1"}
    env.pop("LMSTUDY_GPUS")
    env["PATH"] = path_without_nvidia_smi()
    first = holder({**env, "LMSTUDY_GPUS": "0,1"})
    shown = subprocess.run(
        [*LEASE, sys.executable, "-c", "import os; print(os.environ['CUDA_VISIBLE_DEVICES'])"],
        env={**env, "LMSTUDY_GPUS": "0,1"}, capture_output=True, text=True, check=True, timeout=60,
    )
    assert shown.stdout.strip() == "1"
    first.stdin.close()
    first.wait(timeout=30)


def test_a_lease_named_in_the_environment_but_not_held_is_not_trusted(tmp_path):
    """A job's descendant that was not handed the lock (or a run started from a job's shell) leases anew."""
    env = lease_env(tmp_path, "0")
    first = holder(env)
    # What a leased job's environment holds, without its lock's file descriptor.
    inherited = {**env, "LMSTUDY_GPU_LEASE_FD": "3", "LMSTUDY_GPU_SOURCE": "lease", "LMSTUDY_GPU_INDEX": "0",
                 "LMSTUDY_GPU_LEASE_FILE": str(tmp_path / "leases" / "gpu-0.lock")}
    second = subprocess.Popen(
        [*LEASE, sys.executable, "-c", "pass"], env=inherited, stderr=subprocess.PIPE, text=True,
    )
    assert "waiting for one" in line_of(second.stderr)
    first.stdin.close()
    first.wait(timeout=30)
    assert second.wait(timeout=60) == 0


def test_a_cpu_run_takes_no_gpu_lease(tmp_path):
    env = {**lease_env(tmp_path, ""), "LMSTUDY_DEVICE": "cpu"}
    env.pop("LMSTUDY_GPUS")
    shown = subprocess.run(
        [*LEASE, sys.executable, "-c", "import os; print(os.environ['LMSTUDY_GPU_SOURCE'])"],
        env=env, capture_output=True, text=True, check=True, timeout=60,
    )
    assert shown.stdout.strip() == "none" and not (tmp_path / "leases").exists()


def test_without_gpus_a_job_runs_unleased(tmp_path):
    env = lease_env(tmp_path, "")
    env.pop("LMSTUDY_GPUS")
    env["PATH"] = str(tmp_path)  # no nvidia-smi to list any GPU
    shown = subprocess.run(
        [*LEASE, sys.executable, "-c", "import os; print(os.environ['LMSTUDY_GPU_SOURCE'])"],
        env=env, capture_output=True, text=True, check=True,
    )
    assert shown.stdout.strip() == "none"


# -- through Snakemake ---------------------------------------------------------------------------


# A few of the smoke preset's timing jobs: enough to overlap, few enough to be quick.
TIMING_JOBS = [f"tiny_ctx{ctx}_{precision}_naive" for ctx in (32, 64) for precision in ("fp32", "bf16")]


def timing_targets(run: str, count: int) -> list[str]:
    return [f"results/{run}/timing/raw/{job}.csv" for job in TIMING_JOBS[:count]]


@pytest.mark.workflow
def test_two_snakemake_runs_at_once_take_turns_on_one_gpu(tmp_path):
    """As a user would: two runs in one clone, other run names, explicit targets, one GPU."""
    workdir = new_workdir(tmp_path / "clone")
    env = lease_env(tmp_path, "0")

    def run(name):
        return snakemake(
            workdir, *timing_targets(name, 3), "--cores", "2", "--resources", "gpu=1",
            "--config", "preset=smoke", f"run={name}", env=env,
        )

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run, ["first", "second"]))
    spans = pd.concat([job_spans(workdir / "results" / name) for name in ["first", "second"]])
    assert set(spans["run"]) == {"first", "second"} and len(spans) == 6
    assert set(spans["gpu_index"]) == {"0"} and set(spans["gpu_chosen_by"]) == {"lease"}
    assert study_cost.overlaps_on_one_gpu(spans).empty
    assert study_cost.most_at_once(spans) == 1
    # One run's jobs waited for the other's: the runs did overlap in time.
    assert spans["waited_s"].sum() > 0


@pytest.mark.workflow
def test_k_gpus_run_k_jobs_at_once_each_on_its_own(tmp_path):
    workdir = new_workdir(tmp_path / "clone")
    env = lease_env(tmp_path, "0,1")
    snakemake(
        workdir, *timing_targets("two", 4), "--cores", "2", "--resources", "gpu=2",
        "--config", "preset=smoke", "run=two", env=env,
    )
    spans = job_spans(workdir / "results" / "two")
    assert set(spans["gpu_index"]) == {"0", "1"}
    assert study_cost.overlaps_on_one_gpu(spans).empty
    assert study_cost.most_at_once(spans) == 2
    cores = cpu_placement.sibling_order(sorted(os.sched_getaffinity(0)))
    assert set(spans["cpu_cores"]) == {
        cpu_placement.cores_text(cpu_placement.core_share(cores, slot, 2)) for slot in (0, 1)
    }
    said = " ".join(cost.concurrency_findings(spans.assign(measuring=True)))
    assert "at most 2 at once, on 2 GPUs (0, 1)" in said
    per_gpu = cost.by_gpu(spans.assign(measuring=True))
    assert list(per_gpu["GPU (index)"]) == ["0", "1"] and per_gpu["jobs"].sum() == len(spans)


def test_cores_follow_the_gpus_place_on_the_machine_not_in_the_runs_pool():
    listed = [gpu_lease.Gpu(str(i), f"GPU-{i}") for i in range(4)]
    only_two = gpu_lease.pool({"LMSTUDY_GPUS": "2"}, listed)
    assert cpu_placement.cpu_slot(only_two[0], 0, only_two, listed) == (2, 4)
    assert cpu_placement.core_share(list(range(64)), 2, 4) == list(range(32, 48))
    # Fake GPUs, unknown to nvidia-smi: their place in the run's own pool.
    fake = [gpu_lease.Gpu("0"), gpu_lease.Gpu("1")]
    assert cpu_placement.cpu_slot(fake[1], 1, fake, []) == (1, 2)


def test_cpu_pinning_can_be_turned_off_to_measure_what_it_gives(tmp_path):
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU: nothing to share out")

    def cores(**extra: str) -> list[int]:
        shown = subprocess.run(
            [*LEASE, sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
            env={**lease_env(tmp_path, "0,1"), **extra}, capture_output=True, text=True, check=True,
        )
        return json.loads(shown.stdout)

    assert cores() == cpu_placement.core_share(cpu_placement.sibling_order(allowed), 0, 2) != allowed
    assert cores(LMSTUDY_CPU_PINNING="0") == allowed


def fake_sysfs(root: Path) -> Path:
    """Two NUMA nodes of 4 cores × 2 threads (CPU n+8 is CPU n's sibling); GPUs 0-1 on node 0, 2-3 on 1."""
    for cpu in range(16):
        topology = root / f"devices/system/cpu/cpu{cpu}/topology"
        topology.mkdir(parents=True)
        (topology / "physical_package_id").write_text(f"{(cpu // 4) % 2}\n")
        (topology / "core_id").write_text(f"{cpu % 4}\n")
    for gpu in range(4):
        device = root / f"bus/pci/devices/0000:0{gpu}:00.0"
        device.mkdir(parents=True)
        (device / "local_cpulist").write_text("0-3,8-11\n" if gpu < 2 else "4-7,12-15\n")
    return root


def test_each_gpu_gets_whole_cores_nearest_to_it(tmp_path):
    sysfs = fake_sysfs(tmp_path / "sys")
    cpus = list(range(16))

    def cores(gpu, gpus, listed):
        return cpu_placement.cores_for(gpu, gpus.index(gpu), gpus, listed, cpus, sysfs)

    listed = [gpu_lease.Gpu(str(i), f"GPU-{i}", f"00000000:0{i}:00.0") for i in range(4)]
    assert [cores(gpu, listed, listed) for gpu in listed] == [
        [0, 8, 1, 9], [2, 10, 3, 11], [4, 12, 5, 13], [6, 14, 7, 15]
    ]
    # Limited to GPU 3: still its own node's cores, not the first quarter.
    only = gpu_lease.pool({"LMSTUDY_GPUS": "3"}, listed)
    assert cores(only[0], only, listed) == [6, 14, 7, 15]
    # Where the machine does not say which CPUs are near: by the GPU's place, still whole cores
    # (node 0's four cores with their siblings, then node 1's).
    unknown = [gpu_lease.Gpu(str(i), f"GPU-{i}") for i in range(4)]
    assert cores(unknown[1], unknown, unknown) == [2, 10, 3, 11]
    assert cpu_placement.parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]


# -- issue 23, items 2 and 10: the lease folder is the user's, never widened, never a link ---------------


def lease_dir_error(environ: dict) -> str:
    try:
        gpu_lease.lease_dir_of(environ)
    except gpu_lease.LeaseError as error:
        return str(error)
    raise AssertionError("the lease folder was accepted")


def test_a_named_lease_folder_keeps_its_mode(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o770)
    env = {**lease_env(tmp_path, "0"), "LMSTUDY_GPU_LEASE_DIR": str(folder)}
    subprocess.run([*LEASE, sys.executable, "-c", "pass"], env=env, check=True, capture_output=True)
    assert (folder / "gpu-0.lock").exists()
    assert oct(folder.stat().st_mode & 0o7777) == oct(0o770)  # never widened (it was made 1777)
    assert (folder / "gpu-0.lock").stat().st_mode & 0o777 == 0o660  # writable as the folder is, no more


def test_the_default_lease_folder_is_this_users_own(tmp_path):
    assert gpu_lease.default_lease_dir({}, uid=1234) == Path("/tmp/lmstudy-gpu-leases-1234")
    runtime = tmp_path / "run-user"
    runtime.mkdir(mode=0o700)
    os.chown(runtime, 1234, 1234)
    xdg = {"XDG_RUNTIME_DIR": str(runtime)}
    assert gpu_lease.default_lease_dir(xdg, uid=1234) == runtime / "lmstudy-gpu-leases"
    # A runtime folder that is not the user's own is not used.
    assert gpu_lease.default_lease_dir(xdg, uid=99) == Path("/tmp/lmstudy-gpu-leases-99")
    made = tmp_path / "new" / "leases"
    assert gpu_lease.lease_dir_of({"LMSTUDY_GPU_LEASE_DIR": str(made)}) == made
    assert made.stat().st_mode & 0o777 == 0o700  # made private


@pytest.mark.parametrize(("plant", "named"), [
    (lambda p, t: p.symlink_to(t), "is a symbolic link"),
    (lambda p, t: (p.mkdir(), os.chown(p, 65534, 65534)), "belongs to another user (uid 65534)"),
    (lambda p, t: (p.mkdir(), os.chmod(p, 0o777)), "writable by every user but not sticky"),
    (lambda p, t: p.write_text(""), "is not a folder"),
])
def test_a_lease_folder_another_user_could_redirect_or_rename_in_is_refused(tmp_path, plant, named):
    folder, target = tmp_path / "leases", tmp_path / "target"
    target.mkdir()
    plant(folder, target)
    message = lease_dir_error({"LMSTUDY_GPU_LEASE_DIR": str(folder)})
    assert named in message and "LMSTUDY_GPU_LEASE_DIR" in message and "1777" not in message
    assert not list(target.iterdir())  # nothing made where a link pointed


def test_a_shared_sticky_folder_is_used_as_it_is(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    assert gpu_lease.lease_dir_of({"LMSTUDY_GPU_LEASE_DIR": str(shared)}) == shared
    assert shared.stat().st_mode & 0o7777 == 0o1777


def test_a_lock_file_that_is_a_hard_link_is_refused(tmp_path):
    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    precious = tmp_path / "precious"
    precious.write_text("keep me")
    os.link(precious, folder / "gpu-0.lock")
    with pytest.raises(gpu_lease.LeaseError, match="hard link"):
        gpu_lease.acquire([gpu_lease.Gpu("0")], folder, "test")
    assert precious.read_text() == "keep me"


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root to become another user")
def test_a_lease_folder_this_user_cannot_write_is_one_sentence(tmp_path):
    # Outside pytest's own folder, which only root may enter.
    with tempfile.TemporaryDirectory(dir="/tmp") as where:
        os.chmod(where, 0o755)
        folder = Path(where) / "roots"
        folder.mkdir(mode=0o755)  # root's, not writable by nobody
        env = {**lease_env(tmp_path, "0"), "LMSTUDY_GPU_LEASE_DIR": str(folder), "LMSTUDY_JOB_SERVER": "0"}
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *LEASE,
             sys.executable, "-c", "pass"],
            env=env, capture_output=True, text=True, timeout=120,
        )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"the GPU lease folder {folder} is not writable by this user" in lines[0]


# Issue 32, item 10: a link planted as a lock file is named as a link.
def test_a_lock_file_that_is_a_symbolic_link_is_named_as_one(tmp_path):
    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    precious = tmp_path / "precious"
    precious.write_text("keep me")
    (folder / "gpu-0.lock").symlink_to(precious)
    with pytest.raises(gpu_lease.LeaseError) as raised:
        gpu_lease.acquire([gpu_lease.Gpu("0")], folder, "test")
    assert f"gpu-0.lock is a symbolic link to {precious}" in str(raised.value)
    assert "remove the link" in str(raised.value) and precious.read_text() == "keep me"


# Issue 40: a link another user planted is said to be theirs, and this user is not told to rm it.
@pytest.mark.skipif(os.getuid() != 0, reason="making a link owned by another user takes root")
def test_a_lock_link_of_another_user_is_said_to_be_theirs(tmp_path):
    import pwd

    folder = tmp_path / "leases"
    folder.mkdir(mode=0o700)
    link = folder / "gpu-0.lock"
    link.symlink_to(tmp_path / "precious")
    nobody = pwd.getpwnam("nobody").pw_uid
    os.lchown(link, nobody, -1)
    with pytest.raises(gpu_lease.LeaseError) as raised:
        gpu_lease.acquire([gpu_lease.Gpu("0")], folder, "test")
    said = str(raised.value)
    assert "made by user nobody" in said and "ask user nobody or an administrator to remove it" in said
    assert "rm '" not in said
