"""The Ray executor: a run's jobs as Ray tasks, on a cluster or on a local Ray instance.

Resources, retries, shared storage and the cluster: docs/design-rationale.md, "The Ray executor";
setting one up: docs/guides/ray.md.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from values_seg.runtime.allocator import huge_pages
from values_seg.runner.executors import Executor, Job, Outcome, call
from values_seg.runtime.progress import Board

log = logging.getLogger("values_seg.runner")

#: Seconds the storage check waits for every node's marker (a node may first have to start a
#: worker process and set up the run's runtime_env).
CHECK_TIMEOUT = 600.0


class RayClusterError(ValueError):
    """A Ray cluster the run cannot use; the message says why and what to do."""


@dataclass(frozen=True)
class Request:
    """What one job asks Ray for."""

    num_cpus: float
    num_gpus: float
    custom: tuple[tuple[str, float], ...] = ()

    def needs(self) -> dict[str, float]:
        need = {"CPU": self.num_cpus, "GPU": self.num_gpus, **dict(self.custom)}
        return {name: amount for name, amount in need.items() if amount > 0}

    def fits(self, node: Mapping[str, float]) -> bool:
        """Whether a node with these (total) resources can ever run the job."""
        return all(node.get(name, 0.0) >= amount for name, amount in self.needs().items())

    def describe(self) -> str:
        return ", ".join(f"{name}={amount:g}" for name, amount in self.needs().items()) or "no resources"


def requests(resources: Mapping[str, Mapping[str, Any]], threads: int, gpu: bool) -> dict[str, Request]:
    """Each stage's request: what ``resources`` (the config's ``ray.resources``) sets, else
    ``threads`` CPUs and, where ``gpu``, one GPU."""
    out = {}
    for stage, r in resources.items():
        num_cpus = float(threads) if r.get("num_cpus") is None else float(r["num_cpus"])
        num_gpus = (1.0 if gpu else 0.0) if r.get("num_gpus") is None else float(r["num_gpus"])
        custom = tuple(sorted((name, float(amount)) for name, amount in (r.get("custom") or {}).items()))
        out[stage] = Request(num_cpus, num_gpus, custom)
    return out


def default_settings() -> dict[str, Any]:
    """The ``ray`` config section's defaults (:class:`values_seg.config.experiment.Ray` is their one place)."""
    import dataclasses

    from values_seg.config.experiment import Ray

    return dataclasses.asdict(Ray())


class RayExecutor(Executor):
    """Jobs as Ray tasks (see the module docstring). ``settings``: the config's ``ray`` section."""

    name = "ray"
    parallel = True

    def __init__(self, settings: Mapping[str, Any] | None = None, threads: int = 1, device: str | None = "auto",
                 workers: int = 2):
        try:
            import ray
        except ImportError as e:
            raise RayClusterError("executor 'ray' needs Ray: pip install 'values-seg[ray]'") from e
        self.ray = ray
        self.settings = {**default_settings(), **(settings or {})}
        self.threads, self.device, self.workers = int(threads), str(device or "auto"), int(workers)
        self._requests: dict[str, Request] | None = None
        self._hide_gpus = False

    # -- session ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def open(self, shared: str | os.PathLike) -> Iterator["RayExecutor"]:
        """Connect (or start a local instance), decide every stage's request, check that every
        node that can run a job sees ``shared``; disconnect (or stop what was started) at the end."""
        ray = self.ray
        owned = not ray.is_initialized()
        if owned:
            self._connect()
        elif self.settings.get("runtime_env"):
            log.warning("ray.runtime_env is ignored: Ray was already initialised in this process")
        try:
            nodes = alive_nodes(ray)
            has_gpus = any(n["Resources"].get("GPU", 0) > 0 for n in nodes)
            gpu = self.device.startswith("cuda") or (self.device == "auto" and has_gpus)
            self._hide_gpus = has_gpus
            self._requests = requests(self.settings["resources"], self.threads, gpu)
            workers = [n for n in nodes if any(r.fits(n["Resources"]) for r in self._requests.values())]
            check_shared_storage(ray, Path(shared), workers or nodes)
            yield self
        finally:
            self._requests = None
            if owned:
                ray.shutdown()

    def _connect(self) -> None:
        ray = self.ray
        address = self.settings.get("address") or os.environ.get("RAY_ADDRESS")
        common = dict(logging_level=logging.WARNING, runtime_env=dict(self.settings.get("runtime_env") or {}) or None)
        if address:
            source = "ray.address" if self.settings.get("address") else "$RAY_ADDRESS"
            try:
                reachable(address)  # Ray itself would retry an unreachable address for minutes
                ray.init(address=address, **common)
            except Exception as e:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError, ...
                raise RayClusterError(f"executor ray: cannot connect to the Ray cluster at {address!r} (from "
                                      f"{source}): {type(e).__name__}: {e}; is the cluster up (`ray status`)?") from e
        else:  # address="local": a new instance, never someone else's cluster found on this machine
            with huge_pages():  # its workers allocate as the process executor's do (values_seg.runtime.allocator)
                ray.init(address="local", num_cpus=self._local_cpus(), include_dashboard=False, **common)

    def _local_cpus(self) -> int:
        """A local instance runs ``workers`` jobs of ``threads`` CPUs at a time (as the process
        executor does), and at least one job of the largest configured request."""
        resources = self.settings["resources"].values()
        largest = max((float(r["num_cpus"]) for r in resources if r.get("num_cpus") is not None), default=0.0)
        return max(1, self.workers * self.threads, int(-(-largest // 1)))

    # -- jobs ---------------------------------------------------------------------------------
    def request(self, stage: str) -> Request:
        if self._requests is None:
            raise RuntimeError("RayExecutor: run jobs inside `with executor.open(cache_dir):`")
        return self._requests.get(stage) or Request(float(self.threads), 0.0)

    def options(self, job: Job) -> dict[str, Any]:
        """The Ray task options of ``job``: its stage's request, retries, a name ``stage:job id``
        (``ray list tasks`` and the worker's process title show it)."""
        r = self.request(job.stage)
        options = dict(name=f"{job.stage}:{job.id}", num_cpus=r.num_cpus, num_gpus=r.num_gpus,
                       max_retries=int(self.settings["max_retries"]), retry_exceptions=False)
        if r.custom:
            options["resources"] = dict(r.custom)
        if self._hide_gpus and r.num_gpus == 0:
            options["runtime_env"] = {"env_vars": {"CUDA_VISIBLE_DEVICES": ""}}
        return options

    def run(self, jobs: Sequence[Job]) -> Iterator[Outcome]:
        ray = self.ray
        nodes = [n["Resources"] for n in alive_nodes(ray)] if jobs else []
        remote = ray.remote(call)
        refs, unschedulable_jobs = {}, []
        reports = ray.remote(num_cpus=0)(Reports).remote() if self.progress and jobs else None
        board = Board(Taker(ray, reports)) if reports is not None else None
        try:
            for job in jobs:
                request = self.request(job.stage)
                if any(request.fits(n) for n in nodes):
                    report = functools.partial(_to_driver, reports, job.id) if board else None
                    refs[remote.options(**self.options(job)).remote(job.fn, job.args, job.kwargs, report)] = job
                else:
                    unschedulable_jobs.append(Outcome(job, False, error=unschedulable(job.stage, request, nodes)))
            yield from unschedulable_jobs
            pending = list(refs)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                job = refs.pop(done[0])
                try:
                    ok, value = ray.get(done[0])
                except ray.exceptions.RayError as e:
                    ok, value = False, self.lost(e)
                if board:
                    board.finished(job.id)
                yield Outcome(job, ok, value if ok else None, None if ok else value)
        finally:  # an interrupted run leaves no job of it running
            for ref in refs:
                ray.cancel(ref, force=True)
            if board:
                board.close()
                with contextlib.suppress(Exception):
                    ray.kill(reports)

    def lost(self, error: Exception) -> str:
        """The message of a job Ray could not complete."""
        exceptions = self.ray.exceptions
        died = (exceptions.WorkerCrashedError, exceptions.NodeDiedError, exceptions.OutOfMemoryError)
        text = "".join(traceback.format_exception(error))
        if isinstance(error, died):
            return (f"its worker process or node died, and so did every re-run Ray made (ray.max_retries = "
                    f"{self.settings['max_retries']}):\n{text}")
        return text


class Reports:
    """(A Ray actor.) The case counts the jobs sent since the driver last took them."""

    def __init__(self):
        self.messages: list = []

    def put(self, message: tuple) -> None:
        self.messages.append(message)

    def take(self) -> list:
        messages, self.messages = self.messages, []
        return messages


def _to_driver(reports, job: str, description: str, done: int | None, total: int, unit: str) -> None:
    """(In a job.) One count of ``job``'s loop, to the driver: sent without waiting for an answer."""
    reports.put.remote((job, description, done, total, unit))


class Taker:
    """The counts waiting in the ``reports`` actor, never waiting for them: each call returns what
    the last request brought if it is back (a lost actor raises; the board goes on without), and
    one request is out at a time (a request given up on would lose its counts)."""

    def __init__(self, ray, reports):
        self.ray, self.reports, self.pending = ray, reports, None

    def __call__(self) -> list:
        if self.pending is None:
            self.pending = self.reports.take.remote()
        done, _ = self.ray.wait([self.pending], timeout=0)
        if not done:
            return []
        ref, self.pending = self.pending, None
        return self.ray.get(ref)


def reachable(address: str, timeout: float = 10.0) -> None:
    """Raise ``ConnectionError`` unless ``host:port`` (also ``ray://host:port``) accepts a TCP
    connection; ``auto`` and addresses without a port are left to Ray."""
    import socket

    host, _, port = address.split("://", 1)[-1].rstrip("/").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConnectionError(f"nothing answers at {host}:{port} ({e})") from e


def alive_nodes(ray) -> list[dict]:
    return [n for n in ray.nodes() if n.get("Alive")]


def unschedulable(stage: str, request: Request, nodes: Sequence[Mapping[str, float]]) -> str:
    def offer(node: Mapping[str, float]) -> str:
        shown = {k: v for k, v in node.items() if not k.startswith(("node:", "accelerator_type:"))
                 and k not in ("memory", "object_store_memory")}
        return ", ".join(f"{k}={v:g}" for k, v in sorted(shown.items())) or "nothing"

    offers = "; ".join(offer(n) for n in nodes) or "no node"
    return (f"no node of the Ray cluster can run a job of stage {stage!r}: it asks for {request.describe()}; "
            f"the nodes offer: {offers}. Change ray.resources.{stage} or add such a node")


def _write_marker(directory: str, name: str, token: str) -> str | None:
    """(A task on one node.) Write ``token`` into ``directory/name``; ``None``, or why it could not."""
    folder = Path(directory)
    if not folder.is_dir():
        return f"{directory} does not exist there"
    from values_seg.storage import atomic

    try:
        atomic.write(folder / name, token)
    except OSError as e:
        return f"cannot write into {directory} there: {e}"
    return None


def check_shared_storage(ray, directory: Path, nodes: Sequence[Mapping[str, Any]],
                         timeout: float = CHECK_TIMEOUT) -> None:
    """A task on each of ``nodes`` writes a marker file into ``directory``; the driver reads every
    marker back. Raise :class:`RayClusterError` naming the directory and each node that does not
    share it."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    write = ray.remote(_write_marker)
    checks = []
    for node in nodes:
        name = f".values-seg-storage-check-{token[:8]}-{node['NodeID'][:12]}"
        where = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ref = write.options(num_cpus=0, max_retries=1, scheduling_strategy=where, name="values-seg:storage-check") \
            .remote(str(directory), name, token)
        checks.append((node, name, ref))
    _, late = ray.wait([ref for _, _, ref in checks], num_returns=len(checks), timeout=timeout)
    problems = []
    for node, name, ref in checks:
        label = (f"node {node.get('NodeManagerHostname', '?')} ({node.get('NodeManagerAddress', '?')}, "
                 f"{node['NodeID'][:12]})")
        if ref in late:
            ray.cancel(ref, force=True)
            problems.append(f"{label}: no answer within {timeout:g} s")
            continue
        try:
            error = ray.get(ref)
        except ray.exceptions.RayError as e:
            error = f"the check task failed: {type(e).__name__}: {e}"
        marker = directory / name
        if error is None and not (marker.is_file() and marker.read_text() == token):
            error = f"it wrote {marker}, but this driver does not see that file: the path is other storage there"
        marker.unlink(missing_ok=True)
        if error:
            problems.append(f"{label}: {error}")
    if problems:
        raise RayClusterError(
            f"executor ray: the cache directory {directory} must be on storage that every node of the Ray cluster "
            f"sees under the same path (a shared filesystem), and it is not:\n  - " + "\n  - ".join(problems)
            + "\nput the run directory (--out) or cache_dir on a filesystem mounted on every node")
