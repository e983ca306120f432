"""The endpoints of Kafka Connect's REST API, with Kafka's answer shapes and status codes.

Reads are served from this worker's view of the internal topics; writes run on the herder
thread and only on the leader (a follower forwards them, see rest.py)."""

from __future__ import annotations

from typing import Any

from connect import __version__, offsets_api
from connect import loggers as log_levels
from connect.api import SinkConnector
from connect.configdef import ConfigException
from connect.connector_config import errors_of, validate
from connect.errors import BadRequest, Conflict, NotFound, NotLeader, NotOwner
from connect.errors import connector_not_found as not_found
from connect.herder import Herder
from connect.rest import Request, Response, Router
from connect.worker import SourceTaskRunner

router = Router()
COMMIT = "millrace"


def _type(herder: Herder, config: dict[str, str]) -> str:
    try:
        cls = herder.plugins.find(config.get("connector.class", ""))
    except ConfigException:
        return "unknown"
    return "sink" if issubclass(cls, SinkConnector) else "source"


def _config(herder: Herder, name: str) -> dict[str, str]:
    config = herder.configs.snapshot().connectors.get(name)
    if config is None:
        raise not_found(name)
    return config


def _info(herder: Herder, name: str) -> dict[str, Any]:
    snap = herder.configs.snapshot()
    config = snap.connectors.get(name)
    if config is None:
        raise not_found(name)
    return {"name": name, "config": config,
            "tasks": [{"connector": name, "task": i} for i in range(len(snap.tasks.get(name,
                                                                                     [])))],
            "type": _type(herder, config)}


def _state(status: Any) -> dict[str, Any]:
    out = {"state": status.state, "worker_id": status.worker_id}
    if status.trace:
        out["trace"] = status.trace
    return out


def _status(herder: Herder, name: str) -> dict[str, Any]:
    snap = herder.configs.snapshot()
    config = snap.connectors.get(name)
    if config is None:
        raise not_found(name)
    connector = herder.statuses.connectors.get(name)
    if connector is None:
        raise NotFound(f"No status found for connector {name}")
    tasks = []
    for i in range(len(snap.tasks.get(name, []))):
        status = herder.statuses.tasks.get((name, i))
        if status is not None:
            tasks.append({"id": i, **_state(status)})
    return {"name": name, "connector": _state(connector), "tasks": tasks,
            "type": _type(herder, config)}


def _leader(herder: Herder) -> None:
    if not herder.is_leader:
        raise NotLeader(herder.leader_url)


def _check_config(herder: Herder, name: str, given: Any) -> dict[str, str]:
    if not isinstance(given, dict):
        raise BadRequest("Connector configuration must be a JSON object")
    config = {str(k): _text(v) for k, v in given.items() if v is not None}
    if config.get("name", name) != name:
        raise BadRequest(f"Connector name configuration ({config['name']}) doesn't match "
                         f"connector name in the URL ({name})")
    config["name"] = name
    infos = validate(herder.plugins, config)
    if infos["error_count"]:
        errors = errors_of(infos)
        raise BadRequest(
            f"Connector configuration is invalid and contains the following {len(errors)} "
            "error(s):\n" + "\n".join(e.split(": ", 1)[1] for e in errors) +
            "\nYou can also find the above list of errors at the endpoint "
            "`/connector-plugins/{connectorType}/config/validate`")
    return config


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@router.add("GET", "/")
async def root(req: Request) -> Response:
    return Response(200, {"version": __version__, "commit": COMMIT,
                          "kafka_cluster_id": req.herder.kafka_cluster_id})


@router.add("GET", "/connectors")
async def list_connectors(req: Request) -> Response:
    names = sorted(req.herder.configs.snapshot().connectors)
    expand = [v for k, v in req.pairs if k == "expand"]
    if not expand:
        return Response(200, names)
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        entry: dict[str, Any] = {}
        if "status" in expand:
            try:
                entry["status"] = _status(req.herder, name)
            except NotFound:
                continue
        if "info" in expand:
            entry["info"] = _info(req.herder, name)
        out[name] = entry
    return Response(200, out)


@router.add("POST", "/connectors")
async def create_connector(req: Request) -> Response:
    body = req.json()
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object")
    name = str(body.get("name") or "").strip()
    if not name:
        raise BadRequest("Connector name must not be empty")
    initial = body.get("initial_state")
    if initial not in (None, "RUNNING", "PAUSED", "STOPPED"):
        raise BadRequest(f"Invalid initial state {initial}: must be RUNNING, PAUSED or STOPPED")
    herder = req.herder

    def create() -> dict[str, Any]:
        _leader(herder)
        if name in herder.configs.snapshot().connectors:
            raise Conflict(f"Connector {name} already exists")
        config = _check_config(herder, name, body.get("config"))
        if initial in ("PAUSED", "STOPPED"):
            herder.configs.put_target_state(name, initial)
        herder.configs.put_connector(name, config)
        herder.configs.log.read_to_end()
        return _info(herder, name)
    return Response(201, await req.on_herder(create))


@router.add("GET", "/connectors/{name}")
async def get_connector(req: Request) -> Response:
    return Response(200, _info(req.herder, req.params["name"]))


@router.add("DELETE", "/connectors/{name}")
async def delete_connector(req: Request) -> Response:
    herder, name = req.herder, req.params["name"]

    def delete() -> None:
        _leader(herder)
        _config(herder, name)
        herder.configs.remove_connector(name)
        herder.configs.log.read_to_end()
        herder.statuses.put_tombstone(f"status-connector-{name}")
    await req.on_herder(delete)
    return Response(204)


@router.add("GET", "/connectors/{name}/config")
async def get_config(req: Request) -> Response:
    return Response(200, _config(req.herder, req.params["name"]))


async def _put_config(req: Request, patch: bool) -> Response:
    herder, name, body = req.herder, req.params["name"], req.json()
    if not isinstance(body, dict):
        raise BadRequest("Connector configuration must be a JSON object")

    def put() -> tuple[bool, dict[str, Any]]:
        _leader(herder)
        existing = herder.configs.snapshot().connectors.get(name)
        if patch and existing is None:
            raise not_found(name)
        merged = {**(existing or {}), **body} if patch else body
        config = _check_config(herder, name, merged)
        herder.configs.put_connector(name, config)
        herder.configs.log.read_to_end()
        return existing is None, _info(herder, name)
    created, info = await req.on_herder(put)
    return Response(201 if created else 200, info)


@router.add("PUT", "/connectors/{name}/config")
async def put_config(req: Request) -> Response:
    return await _put_config(req, patch=False)


@router.add("PATCH", "/connectors/{name}/config")
async def patch_config(req: Request) -> Response:
    return await _put_config(req, patch=True)


@router.add("GET", "/connectors/{name}/status")
async def connector_status(req: Request) -> Response:
    return Response(200, _status(req.herder, req.params["name"]))


@router.add("GET", "/connectors/{name}/tasks")
async def list_tasks(req: Request) -> Response:
    name = req.params["name"]
    _config(req.herder, name)
    tasks = req.herder.configs.snapshot().tasks.get(name, [])
    return Response(200, [{"id": {"connector": name, "task": i}, "config": config}
                          for i, config in enumerate(tasks)])


@router.add("POST", "/connectors/{name}/tasks")
async def put_tasks(req: Request) -> Response:
    """Internal: a worker that runs a connector hands its task configs to the leader."""
    herder, name, body = req.herder, req.params["name"], req.json()
    if not isinstance(body, list) or not all(isinstance(c, dict) for c in body):
        raise BadRequest("Task configs must be a JSON list of objects")

    def put() -> None:
        _leader(herder)
        _config(herder, name)
        herder.put_task_configs(name, body)
    await req.on_herder(put)
    return Response(204)


def _task_id(req: Request) -> tuple[str, int]:
    name = req.params["name"]
    _config(req.herder, name)
    try:
        index = int(req.params["task"])
    except ValueError:
        raise NotFound(f"Unknown task {req.params['task']}") from None
    if not 0 <= index < len(req.herder.configs.snapshot().tasks.get(name, [])):
        raise NotFound(f"Task {name}-{index} not found")
    return name, index


@router.add("GET", "/connectors/{name}/tasks/{task}/status")
async def task_status(req: Request) -> Response:
    task = _task_id(req)
    status = req.herder.statuses.tasks.get(task)
    if status is None:
        raise NotFound(f"No status found for task {task[0]}-{task[1]}")
    return Response(200, {"id": task[1], **_state(status)})


@router.add("POST", "/connectors/{name}/tasks/{task}/restart")
async def restart_task(req: Request) -> Response:
    task, herder = _task_id(req), req.herder

    def restart() -> None:
        if not herder.owns_task(task):
            status = herder.statuses.tasks.get(task)
            raise NotOwner(herder.config.worker_url(status.worker_id) if status else None)
        herder.restart_task(task)
    await req.on_herder(restart)
    return Response(204)


@router.add("GET", "/connectors/{name}/topics")
async def active_topics(req: Request) -> Response:
    name = req.params["name"]
    _config(req.herder, name)
    with req.herder.statuses.lock:
        topics = sorted(req.herder.statuses.topics.get(name, ()))
    return Response(200, {name: {"topics": topics}})


@router.add("PUT", "/connectors/{name}/topics/reset")
async def reset_topics(req: Request) -> Response:
    name = req.params["name"]
    _config(req.herder, name)
    req.herder.statuses.forget_topics(name)
    return Response(202)


async def _target(req: Request, state: str) -> None:
    herder, name = req.herder, req.params["name"]

    def put() -> None:
        _leader(herder)
        _config(herder, name)
        herder.configs.put_target_state(name, state)
        if state == "STOPPED":
            herder.configs.put_tasks(name, [])
        herder.configs.log.read_to_end()
    await req.on_herder(put)


@router.add("PUT", "/connectors/{name}/pause")
async def pause(req: Request) -> Response:
    await _target(req, "PAUSED")
    return Response(202)


@router.add("PUT", "/connectors/{name}/resume")
async def resume(req: Request) -> Response:
    await _target(req, "STARTED")
    return Response(202)


@router.add("PUT", "/connectors/{name}/stop")
async def stop(req: Request) -> Response:
    await _target(req, "STOPPED")
    return Response(204)


@router.add("POST", "/connectors/{name}/restart")
async def restart_connector(req: Request) -> Response:
    herder, name = req.herder, req.params["name"]
    include_tasks, only_failed = req.flag("includeTasks"), req.flag("onlyFailed")

    def restart() -> dict[str, Any] | None:
        _leader(herder)
        _config(herder, name)
        plan = _restart_plan(herder, name, include_tasks, only_failed)
        herder.configs.put_restart(name, include_tasks, only_failed)
        return plan
    plan = await req.on_herder(restart)
    if not include_tasks and not only_failed:
        return Response(204)
    return Response(202, plan)


def _restart_plan(herder: Herder, name: str, include_tasks: bool,
                  only_failed: bool) -> dict[str, Any]:
    """The status as Kafka answers a restart: RESTARTING where a restart will happen."""
    try:
        status = _status(herder, name)
    except NotFound:
        status = {"name": name, "connector": {"state": "UNASSIGNED", "worker_id": ""},
                  "tasks": [], "type": _type(herder, _config(herder, name))}
    if not only_failed or status["connector"]["state"] == "FAILED":
        status["connector"]["state"] = "RESTARTING"
    for task in status["tasks"]:
        if include_tasks and (not only_failed or task["state"] == "FAILED"):
            task["state"] = "RESTARTING"
    return status


@router.add("GET", "/connectors/{name}/offsets")
async def get_offsets(req: Request) -> Response:
    name = req.params["name"]
    config = _config(req.herder, name)
    return Response(200, await req.on_herder(
        lambda: offsets_api.read(req.herder, name, config)))


@router.add("PATCH", "/connectors/{name}/offsets")
async def alter_offsets(req: Request) -> Response:
    herder, name, body = req.herder, req.params["name"], req.json()

    def alter() -> dict[str, str]:
        _leader(herder)
        return offsets_api.alter(herder, name, body)
    return Response(200, await req.on_herder(alter))


@router.add("DELETE", "/connectors/{name}/offsets")
async def reset_offsets(req: Request) -> Response:
    herder, name = req.herder, req.params["name"]

    def reset() -> dict[str, str]:
        _leader(herder)
        return offsets_api.reset(herder, name)
    return Response(200, await req.on_herder(reset))


@router.add("GET", "/connector-plugins")
async def plugins(req: Request) -> Response:
    return Response(200, req.herder.plugins.listing())


def _plugin(req: Request) -> type:
    try:
        return req.herder.plugins.find(req.params["plugin"])
    except ConfigException as exc:
        raise NotFound(str(exc)) from None


@router.add("GET", "/connector-plugins/{plugin}/config")
async def plugin_config(req: Request) -> Response:
    cls = _plugin(req)
    return Response(200, [key.definition() for key in cls().config().keys.values()])


@router.add("PUT", "/connector-plugins/{plugin}/config/validate")
async def validate_config(req: Request) -> Response:
    body = req.json()
    if not isinstance(body, dict):
        raise BadRequest("Connector configuration must be a JSON object")
    cls = _plugin(req)
    given = body.get("connector.class")
    if given is not None and req.herder.plugins.find(str(given)) is not cls:
        raise BadRequest("Included connector type " + str(given) + " does not match request "
                         "type " + req.params["plugin"])
    config = {str(k): _text(v) for k, v in body.items() if v is not None}
    config.setdefault("connector.class", req.params["plugin"])
    return Response(200, validate(req.herder.plugins, config))


@router.add("GET", "/admin/loggers")
async def loggers(req: Request) -> Response:
    return Response(200, log_levels.list_levels())


@router.add("GET", "/admin/loggers/{logger}")
async def logger_level(req: Request) -> Response:
    return Response(200, log_levels.level_of(req.params["logger"]))


@router.add("PUT", "/admin/loggers/{logger}")
async def set_logger_level(req: Request) -> Response:
    if req.query.get("scope", "worker").lower() == "cluster":
        raise BadRequest("scope=cluster is not supported by this worker; use scope=worker")
    return Response(200, log_levels.set_level(req.params["logger"], req.json()))


@router.add("GET", "/metrics/tasks")
async def task_metrics(req: Request) -> Response:
    """Not Kafka's: the throughput of this worker's tasks (connect/metrics.py)."""
    tasks = [{"connector": name, "task": task,
              "type": "source" if isinstance(runner, SourceTaskRunner) else "sink",
              "records_total": runner.metrics.total,
              "records_per_second": runner.metrics.rate()}
             for (name, task), runner in sorted(req.herder.tasks.items())]
    return Response(200, {"worker_id": req.herder.worker_id, "tasks": tasks})
