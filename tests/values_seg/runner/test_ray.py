"""The Ray executor on a real two-node Ray cluster (on this machine) that the tests start and stop
themselves: the same results as the local executor, a worker killed mid-job re-run, a job that
raises recorded once, and the shared-storage check.

The cluster lives in a private temporary folder (``RAY_TMPDIR``), so it never meets another Ray
instance on the machine; every process it starts carries a marker in its environment, and the
teardown checks that none is left running.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from values_seg.config.checks import ConfigError
from values_seg.config.loading import load_config
from values_seg.config.checks import preflight
from values_seg.runner import run_experiment
from values_seg.runner.ray_executor import RayClusterError, Request, requests, unschedulable

from tiny import tiny_config

MARKER = "VALUES_SEG_TEST_RAY_CLUSTER"

PLUGIN = '''
import os
from values_seg import hookimpl
from values_seg.components.prediction_model import PredictionModel


class RaisingModel(PredictionModel):
    """Trains like the deterministic model, raises at inference (and notes each attempt)."""
    name = "raising_model"
    family = "deterministic"

    def __init__(self, attempts: str = ""):
        self.attempts = attempts  # a file that gets one line per call of predict

    def predict(self, networks, image):
        with open(self.attempts, "a") as f:
            f.write(f"{os.getpid()}\\n")
        raise RuntimeError("raising_model raises at inference")


@hookimpl
def values_seg_prediction_models():
    return [RaisingModel]


def note_and_exit(attempts):
    """A job whose worker process dies (as if killed) every time."""
    with open(attempts, "a") as f:
        f.write(f"{os.getpid()}\\n")
    os._exit(1)


def note_and_sleep(folder, name):
    """A job that notes its start (a file ``name`` in ``folder``) and then sleeps an hour."""
    import time
    from pathlib import Path

    Path(folder, name).write_text(str(os.getpid()))
    time.sleep(3600)
'''


def tiny(work: Path, **changes) -> dict:
    """Two trainings of 40 epochs (a couple of seconds each: time to kill one midway), and a
    prediction model whose evaluation job raises."""
    return tiny_config(**{
        "name": "tiny_ray",
        "plugins": ["ray_test_plugin"],
        "recipe": {"epochs": 40},
        "prediction_models": ["deterministic", {"name": "ensemble", "params": {"members": 2}},
                              {"name": "raising_model", "params": {"attempts": str(work / "attempts.txt")}}],
        "measures": ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"],
        "aggregations": ["image", {"name": "patch", "params": {"size": 5}}],
        "tasks": ["segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity"],
        "evaluation": {"montage_cases": 1},
        **changes,
    })


def ray_processes(marker: str, title: str = "") -> list[int]:
    """Processes started by the test cluster (their environment carries ``marker``) whose title
    (first command-line word) starts with ``title``; never this process."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if title and not (proc / "cmdline").read_bytes().startswith(title.encode()):
                continue
            if f"{MARKER}={marker}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A head node and a worker node of 1 CPU each; the test process is not connected to it (each
    run's executor connects through ``RAY_ADDRESS`` and disconnects at its end)."""
    from ray.cluster_utils import Cluster

    work = tmp_path_factory.mktemp("ray")
    (work / "ray_test_plugin.py").write_text(textwrap.dedent(PLUGIN))
    ray_tmp = tempfile.mkdtemp(prefix="vsray", dir="/tmp")  # short: Ray's socket paths live under it
    marker = secrets.token_hex(8)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(MARKER, marker)
        mp.setenv("RAY_TMPDIR", ray_tmp)
        mp.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")])))
        mp.syspath_prepend(str(work))
        head = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
        try:
            head.add_node(num_cpus=1)
            head.wait_for_nodes()
            mp.setenv("RAY_ADDRESS", head.address)
            yield work, marker
        finally:
            head.shutdown()
            deadline = time.time() + 600  # a hang guard: processes end at the load's pace
            while ray_processes(marker) and time.time() < deadline:
                time.sleep(0.2)
            left = ray_processes(marker)
            for pid in left:
                os.kill(pid, signal.SIGKILL)
            shutil.rmtree(ray_tmp, ignore_errors=True)
            assert not left, f"processes {left} of the test's Ray cluster outlived it"


@pytest.fixture(scope="module")
def local_run(cluster, tmp_path_factory):
    work, _ = cluster
    run_dir = tmp_path_factory.mktemp("local") / "run"
    summary = run_experiment(load_config(base=tiny(work)), run_dir, executor="local", progress=False)
    (work / "attempts.txt").unlink()
    return run_dir, summary


def failed_jobs(summary) -> set[tuple[str, str]]:
    return {(f["stage"], f["job"]) for f in summary.failures}


def same_tables(a: Path, b: Path) -> None:
    for name in ("results.csv", "cases.csv", "calibration.csv"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), f"{name} differs"


def test_a_sweep_on_ray_gives_the_local_executors_results(cluster, local_run, tmp_path):
    work, _ = cluster
    reference, local = local_run
    assert failed_jobs(local) == {("evaluate", "toy_2/unet/raising_model/seed0")}
    summary = run_experiment(load_config(base=tiny(work, executor="ray")), tmp_path / "ray", progress=False)
    assert summary.trained == 2 and summary.evaluated == 2
    same_tables(reference, tmp_path / "ray")
    assert failed_jobs(summary) == failed_jobs(local)
    assert "raising_model raises at inference" in summary.failures[0]["error"]
    attempts = (work / "attempts.txt").read_text().split()
    assert len(attempts) == 1, f"a job that raised ran {len(attempts)} times; it must not be retried"
    (work / "attempts.txt").unlink()


def test_a_worker_killed_mid_job_is_retried_and_the_results_are_complete(cluster, local_run, tmp_path):
    work, marker = cluster
    reference, local = local_run
    killed: list[tuple[int, str]] = []
    stop = threading.Event()

    def kill_a_training_worker() -> None:
        """SIGKILL the first worker process seen running a training (its title: ray::train:<key>)."""
        while not stop.is_set():
            for pid in ray_processes(marker, title="ray::train:"):
                try:
                    title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
                    os.kill(pid, signal.SIGKILL)
                except OSError:  # it finished just now
                    continue
                killed.append((pid, title))
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_a_training_worker, daemon=True)
    killer.start()
    try:
        summary = run_experiment(load_config(base=tiny(work, executor="ray")), tmp_path / "ray", progress=False)
    finally:
        stop.set()
        killer.join()
    assert killed, "no training worker was seen running"
    pid, title = killed[0]
    print(f"killed worker {pid} running {title}")
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert summary.trained == 2, "the killed job was not re-run"
    assert failed_jobs(summary) == failed_jobs(local)  # only the job that raises
    same_tables(reference, tmp_path / "ray")
    (work / "attempts.txt").unlink()


def test_a_job_whose_worker_always_dies_is_rerun_max_retries_times_then_fails(cluster, tmp_path):
    from ray_test_plugin import note_and_exit

    from values_seg.runner.executor_factory import make_executor
    from values_seg.runner.executors import Job

    work, _ = cluster
    executor = make_executor("ray", ray={"max_retries": 1})
    with executor.open(tmp_path / "cache"):
        [outcome] = list(executor.run([Job("doomed", "train", note_and_exit, (str(tmp_path / "attempts.txt"),))]))
    assert not outcome.ok and outcome.job.id == "doomed"
    assert "its worker process or node died, and so did every re-run Ray made (ray.max_retries = 1)" in outcome.error
    assert len((tmp_path / "attempts.txt").read_text().split()) == 2  # the first run and one re-run


def test_a_cache_the_workers_do_not_see_fails_before_any_work(cluster, tmp_path, monkeypatch):
    """``/proc/self/cwd/cache`` is a different folder in the driver (its working directory) and in
    the workers (Ray starts them in their own copy of ``runtime_env.working_dir``): the same path,
    other storage, as on nodes without a shared filesystem."""
    work, _ = cluster
    shipped = tmp_path / "shipped"
    (shipped / "cache").mkdir(parents=True)
    (shipped / "cache" / "README").write_text("the workers' copy of this folder is their working directory")
    monkeypatch.chdir(tmp_path)
    config = tiny(work, executor="ray", cache_dir="/proc/self/cwd/cache",
                  ray={"runtime_env": {"working_dir": str(shipped)}})
    with pytest.raises(RayClusterError) as error:
        run_experiment(load_config(base=config), tmp_path / "run", progress=False)
    message = str(error.value)
    assert "the cache directory /proc/self/cwd/cache must be on storage that every node" in message
    assert message.count("but this driver does not see that file") == 2  # both nodes
    assert not (tmp_path / "cache" / "checkpoints").exists()  # nothing trained


def test_a_request_no_node_can_meet_fails_its_jobs_at_once(cluster, tmp_path):
    """The test cluster has no GPU: a job that asks for one fails with what the nodes offer (Ray
    itself would wait for such a node forever); the other stages' jobs run."""
    from ray_test_plugin import note_and_exit

    from values_seg.runner.executor_factory import make_executor
    from values_seg.runner.executors import Job

    executor = make_executor("ray", ray={"resources": {"al_train": {"num_gpus": 1}}})
    with executor.open(tmp_path / "cache"):  # returns at all: Ray alone would wait for a GPU node forever
        outcomes = list(executor.run([Job("needs a GPU", "al_train", note_and_exit, (str(tmp_path / "attempts.txt"),)),
                                      Job("sum", "train", sum, ([1, 2, 3],))]))
    by_id = {o.job.id: o for o in outcomes}
    assert not by_id["needs a GPU"].ok and not (tmp_path / "attempts.txt").exists()  # never started
    assert ("no node of the Ray cluster can run a job of stage 'al_train': it asks for CPU=1, GPU=1; "
            "the nodes offer: CPU=1; CPU=1. Change ray.resources.al_train") in by_id["needs a GPU"].error
    assert by_id["sum"].ok and by_id["sum"].value == 6


def test_a_ctrl_c_stops_a_ray_stage_and_its_jobs(cluster, tmp_path, wait_until):
    """Ctrl-C while two jobs sleep on the cluster (to the main thread, as a terminal's lands): the
    stage stops at once, the running jobs are cancelled (their workers end) and the queued one
    never starts."""
    from ray_test_plugin import note_and_sleep

    from values_seg.runner.executor_factory import make_executor
    from values_seg.runner.executors import Job

    started = lambda: sorted(p.name for p in tmp_path.glob("job*"))  # noqa: E731

    def ctrl_c_once_two_run() -> None:
        wait_until(lambda: len(started()) >= 2, "two jobs running")
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    executor = make_executor("ray")
    threading.Thread(target=ctrl_c_once_two_run, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        with executor.open(tmp_path / "cache"):
            list(executor.run([Job(f"job{i}", "train", note_and_sleep, (str(tmp_path), f"job{i}")) for i in range(3)]))
    running = [int((tmp_path / name).read_text()) for name in started()]
    assert len(running) == 2  # the queued job never started
    wait_until(lambda: not any(_running(pid) for pid in running), "the sleeping jobs' workers to end")


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:  # reaped
        return False


# -- without a cluster -------------------------------------------------------------------------
def test_an_address_where_no_cluster_answers_fails_at_once(tmp_path, monkeypatch):
    import socket

    from values_seg.runner.executor_factory import make_executor

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
    with pytest.raises(RayClusterError, match=rf"cannot connect to the Ray cluster at '127.0.0.1:{port}' \(from "
                                              rf"\$RAY_ADDRESS\): ConnectionError: nothing answers at 127.0.0.1:{port}"):
        with make_executor("ray").open(tmp_path / "cache"):
            pass
    with pytest.raises(RayClusterError, match=r"at 'ray://127.0.0.1:\d+' \(from ray.address\)"):
        with make_executor("ray", ray={"address": f"ray://127.0.0.1:{port}"}).open(tmp_path / "cache"):
            pass


def test_the_ray_guide_documents_the_ray_sections_defaults(tmp_path):
    import dataclasses

    import yaml

    from values_seg.runner.ray_executor import default_settings

    guide = (Path(__file__).resolve().parents[3] / "docs" / "guides" / "ray.md").read_text()
    block = guide.split("## Resources and retries")[1].split("```yaml\n")[1].split("```")[0]
    documented = yaml.safe_load(block)
    cfg = load_config(base={**tiny(tmp_path), "plugins": [], "prediction_models": ["deterministic"], **documented})
    assert dataclasses.asdict(cfg.ray) == default_settings() == documented["ray"]


def test_each_stage_requests_threads_cpus_and_a_gpu_only_on_cuda():
    resources = {"train": {"num_cpus": None, "num_gpus": None, "custom": {}},
                 "evaluate": {"num_cpus": 0.5, "num_gpus": 0.25, "custom": {"big_memory": 1}}}
    cpu = requests(resources, threads=3, gpu=False)
    assert cpu["train"] == Request(3.0, 0.0) and cpu["evaluate"] == Request(0.5, 0.25, (("big_memory", 1.0),))
    assert requests(resources, threads=1, gpu=True)["train"] == Request(1.0, 1.0)
    node = {"CPU": 2.0, "GPU": 0.0, "memory": 1e9}
    assert Request(2.0, 0.0).fits(node) and not Request(3.0, 0.0).fits(node) and not Request(1.0, 1.0).fits(node)
    assert not cpu["evaluate"].fits({"CPU": 1.0, "GPU": 1.0})  # no big_memory
    assert Request(0.0, 0.0).fits({})
    message = unschedulable("train", Request(1.0, 1.0), [node, {"CPU": 8.0, "node:10.0.0.2": 1.0}])
    assert "asks for CPU=1, GPU=1; the nodes offer: CPU=2, GPU=0; CPU=8. Change ray.resources.train" in message


@pytest.mark.parametrize("change, message", [
    ({"ray": {"resources": {"trian": {}}}}, r"ray.resources.trian: unknown key; valid keys: train, evaluate, al_train, "
                                            r"al_predict \(did you mean 'train'\?\)"),
    ({"ray": {"resources": {"train": {"num_cpu": 1}}}}, r"ray.resources.train.num_cpu: unknown key.*'num_cpus'"),
    ({"ray": {"resources": {"train": {"num_gpus": 1.5}}}}, r"train.num_gpus: Ray takes fractions only below 1"),
    ({"ray": {"resources": {"evaluate": {"num_cpus": -1}}}}, r"ray.resources.evaluate.num_cpus: must be a number >= 0"),
    ({"ray": {"resources": {"train": {"custom": {"GPU": 1}}}}}, r"custom.GPU: a custom resource name; set CPUs"),
    ({"ray": {"max_retries": -1}}, r"ray.max_retries: must be >= 0, got -1"),
    ({"ray": {"adress": "auto"}}, r"ray.adress: unknown key.*did you mean 'address'"),
    ({"executor": "ray", "device": "cuda:1"}, r"device: 'cuda:1': with executor ray, Ray assigns each job its GPU"),
    ({"executor": "ray", "device": "cuda", "ray": {"resources": {"al_predict": {"num_gpus": 0}}}},
     r"ray.resources.al_predict.num_gpus: 0, but device is 'cuda': its jobs would see no GPU"),
])
def test_a_wrong_ray_section_fails_before_any_work(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        preflight(load_config(base={**tiny(tmp_path), "plugins": [], "prediction_models": ["deterministic"], **change}))


def test_executor_ray_does_not_need_cuda_on_the_driver(tmp_path):
    """The jobs run on the cluster's nodes: ``device: cuda`` is checked there, not here."""
    cfg = load_config(base={**tiny(tmp_path), "plugins": [], "prediction_models": ["deterministic"],
                            "executor": "ray", "device": "cuda"})
    assert cfg.device == "cuda" and cfg.ray.max_retries == 3


def test_a_ray_job_s_evaluation_names_its_combination_and_counts_cases_on_the_driver(cluster, tmp_path, monkeypatch):
    """Issue 32, item 12 under ``executor: ray``: the job's slow case shows on the driver, the
    combination and split named, the cases counted (relayed by a small actor), while it runs."""
    from values_seg import registry

    work, _ = cluster
    from gated_progress import gated_evaluation_progress  # tests/helpers/

    config = tiny(work, recipe={"epochs": 1}, prediction_models=["deterministic"], measures=["predictive_entropy"],
                  tasks=["segmentation"], executor="ray")
    split, total, err = gated_evaluation_progress(tmp_path, config, dict(os.environ), plugins=work)
    dataset = config["datasets"][0]
    assert total == len(registry.create("dataset", dataset["name"], **dataset["params"]).case_ids(split)), err
