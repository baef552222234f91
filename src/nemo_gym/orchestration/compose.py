"""YAML file + Hydra overrides -> a plain dict. Nothing is validated here beyond the YAML itself.

Hydra composes the file (``defaults:`` lists and config groups work, overrides follow Hydra's
grammar: ``a.b=v`` must name an existing key, ``+a.b=v`` adds one, ``++a.b=v`` does either,
``~a.b`` deletes). Interpolations, ``${oc.env:...}`` included, resolve on the submitting machine.
Root keys starting with ``_`` are scratch space for interpolation and are dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from nemo_gym.orchestration.errors import UserError, closest_name
from nemo_gym.orchestration.rules import OC_ENV_RE

TOP_LEVEL_KEYS = "services, compute, driver, job (and optionally otel)"
# How alike a key must be to one in the config to be taken for its misspelling (difflib's ratio).
NEAR_KEY_CUTOFF = 0.8


def compose_config(
    config_path: str | Path, overrides: list[str], shared: SharedComposition | None = None
) -> dict[str, Any]:
    """The file with ``overrides``; ``shared``: what several compositions of the file (a sweep's
    combinations) have in common, composed once."""
    path = _checked_config_path(config_path)
    data = _load_checked_yaml(path)
    _reject_scratch_additions(overrides)
    if overrides or "defaults" in data:
        _check_override_syntax(overrides)
        composed = _hydra_compose(path, overrides, shared)
    else:
        # Nothing to compose: Hydra would return the file as it is, at a cost of ~250 ms.
        composed = _resolve_interpolations(path, data)
    return {k: v for k, v in composed.items() if not str(k).startswith("_")}


def _has_interpolation(node: Any) -> bool:
    if isinstance(node, str):
        return "${" in node
    if isinstance(node, dict):
        return any(_has_interpolation(k) or _has_interpolation(v) for k, v in node.items())
    if isinstance(node, list):
        return any(_has_interpolation(v) for v in node)
    return False


# driver.policy_host written as ${oc.env:VAR} (as NeMo Gym 0.7.0 configs do, for a host the job
# exports) means the node's VAR, not the submitting shell's: it is kept as runtime:VAR and read on
# the driver's node. 0.7.0 resolves it when you submit, which fails or, worse, takes this machine's.
def _defer_node_hosts(data: Any) -> None:
    """Rewrite a policy_host read from the environment into runtime:VAR, in place, before resolution."""
    driver = data.get("driver") if isinstance(data, dict) else None
    host = driver.get("policy_host") if isinstance(driver, dict) else None
    match = OC_ENV_RE.fullmatch(host) if isinstance(host, str) else None
    if match and isinstance(driver, dict):
        driver["policy_host"] = f"runtime:{match.group(1)}"


def _resolve_interpolations(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    _defer_node_hosts(data)
    if not _has_interpolation(data):
        return data
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        container = OmegaConf.to_container(OmegaConf.create(data), resolve=True)
    except OmegaConfBaseException as exc:
        raise UserError(_interpolation_problem(path, exc)) from None
    assert isinstance(container, dict)
    return {str(k): v for k, v in container.items()}


def _interpolation_problem(path: Path, exc: BaseException) -> str:
    key = getattr(exc, "full_key", None)
    where = f"{key}: " if key else ""
    problem = _first_line(exc)
    if problem.startswith("Interpolation key"):
        # Most often a shell variable in a command or a value: ${...} is the config's own syntax.
        return f"{path}: {where}{problem}; for a shell variable write $VAR or \\${{VAR}} instead of ${{VAR}}"
    return f"{path}: {where}{problem}; fix the interpolation or set what it reads"


def _checked_config_path(config_path: str | Path) -> Path:
    path = Path(config_path).expanduser().resolve()
    if not path.exists():
        raise UserError(f"{config_path}: no such file; check the path given to -c/--config")
    if path.is_dir():
        raise UserError(f"{config_path}: is a directory, not a file; pass the YAML file itself")
    if path.suffix != ".yaml":
        raise UserError(
            f"{config_path}: the config file must end in .yaml (Hydra composes only .yaml files); rename it"
        )
    return path


def _load_checked_yaml(path: Path) -> dict[str, Any]:
    """Parse with libyaml for messages with line numbers (Hydra's own are vaguer)."""
    import yaml

    from nemo_gym.orchestration.yamlio import DuplicateKey, load_yaml_unique

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot be read ({exc}); check its permissions and encoding") from None
    try:
        data = load_yaml_unique(text)
    except DuplicateKey as exc:
        raise UserError(f"{path}:{exc.line}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UserError(f"{where}: YAML syntax error: {problem}; fix the file at that line") from None
    if data is None:
        raise UserError(f"{path}: the file is empty; it needs the keys {TOP_LEVEL_KEYS}")
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise UserError(f"{path}: the top level must be a mapping with the keys {TOP_LEVEL_KEYS}, but it is {kind}")
    return data


def _reject_scratch_additions(overrides: list[str]) -> None:
    for override in overrides:
        key = override.lstrip("+~").split("=", 1)[0]
        if override.startswith("+") and key.startswith("_"):
            raise UserError(
                f"override {override!r}: scratch namespace {key.split('.')[0]!r} must be defined in the "
                f"config file; add it there and override its keys without '+'"
            )


def _check_override_syntax(overrides: list[str]) -> None:
    if not overrides:
        return
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except OverrideParseException as exc:
            detail = str(exc).splitlines()[0]
            raise UserError(
                f"override {override!r}: cannot be parsed ({detail}); write key=value, and quote values "
                f"with spaces, commas or brackets: key='a, b'"
            ) from None


class SharedComposition:
    """Compositions of one file that share some overrides (a sweep's combinations), as Hydra makes
    them but with Hydra's composition run once: the shared overrides are composed once, and each
    composition's own value overrides are applied to a copy of that, as Hydra applies value
    overrides after its defaults list (about 70 ms saved per composition). Any other composition (one
    choosing a config group or naming a key the shared ones touch, or whose overrides fail) is
    composed by Hydra in full, so that it errs exactly as it would alone."""

    def __init__(self, config_path: str | Path, shared: list[str]):
        self._path = _checked_config_path(config_path)
        self._shared = list(shared)
        self._keys = {_key_of(o) for o in shared}
        self._base: Any = None
        self._repository: Any = None
        self._unusable = False

    def composed(self, overrides: list[str]) -> Any:
        """``overrides`` composed (an OmegaConf config, Hydra's node dropped), or None: compose in full."""
        import copy

        own = [o for o in overrides if o not in self._shared]
        if len(own) + len(self._shared) != len(overrides) or any(_overlaps(_key_of(o), self._keys) for o in own):
            return None
        # Hydra checks what '+' adds to and '~' deletes with interpolations resolved: one of them
        # before a shared override could see another value than after it.
        last_shared = max((overrides.index(o) for o in self._shared), default=-1)
        if any(o.startswith(("+", "~")) and overrides.index(o) < last_shared for o in own):
            return None
        base = self._composed_base()
        if base is None:
            return None
        try:
            parsed = self._value_overrides(own)
            if parsed is None:
                return None
            cfg = copy.deepcopy(base)
            from hydra._internal.config_loader_impl import ConfigLoaderImpl

            ConfigLoaderImpl._apply_overrides_to_config(parsed, cfg)
        except Exception:  # composed in full, it fails as Hydra fails: the message is then Hydra's own
            return None
        return cfg

    def _composed_base(self) -> Any:
        if self._base is None and not self._unusable:
            try:
                from hydra import compose, initialize_config_dir
                from hydra.core.global_hydra import GlobalHydra

                with initialize_config_dir(version_base=None, config_dir=str(self._path.parent)):
                    self._base = compose(config_name=self._path.stem, overrides=list(self._shared))
                    self._repository = GlobalHydra.instance().config_loader().repository  # type: ignore[attr-defined]
            except Exception:  # every composition then composed in full, each failing as it would alone
                self._unusable = True
        return self._base

    def _value_overrides(self, overrides: list[str]) -> list[Any] | None:
        """Hydra's parsed overrides when every one sets a value (no config group, package, sweep
        or Hydra setting, which Hydra's defaults list handles); else None."""
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(list(overrides))
        for override in parsed:
            if (
                override.is_hydra_override()
                or override.is_sweep_override()
                or override.package is not None
                or self._repository.group_exists(override.key_or_group)
            ):
                return None
        return parsed


def _key_of(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def _overlaps(key: str, keys: set[str]) -> bool:
    """Whether ``key`` is one of ``keys``, inside one or holds one (their order would then matter)."""
    return any(key == k or key.startswith(k + ".") or k.startswith(key + ".") for k in keys)


def _hydra_compose(path: Path, overrides: list[str], shared: SharedComposition | None = None) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        cfg = shared.composed(overrides) if shared is not None else None
        if cfg is None:
            with initialize_config_dir(version_base=None, config_dir=str(path.parent)):
                cfg = compose(config_name=path.stem, overrides=list(overrides))
        raw = OmegaConf.to_container(cfg, resolve=False)
        _defer_node_hosts(raw)
        container = OmegaConf.to_container(OmegaConf.create(raw), resolve=True)
    except MissingConfigException as exc:
        raise UserError(f"{path}: {_first_line(exc)}; check the defaults list and the file names") from None
    except HydraException as exc:
        raise UserError(_override_problem(exc, overrides, lambda key: _config_without(path, overrides, key))) from None
    except OmegaConfBaseException as exc:
        raise UserError(_interpolation_problem(path, exc)) from None
    assert isinstance(container, dict)
    container.pop("hydra", None)
    return {str(k): v for k, v in container.items()}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _override_problem(exc: BaseException, overrides: list[str], config: Callable[[str], dict[str, Any]]) -> str:
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    key = _quoted(lines[0]) if lines else None
    culprit = next((o for o in overrides if key and o.lstrip("+~").split("=", 1)[0] == key), None)
    label = f"override {culprit!r}" if culprit else "override"
    if text.startswith("Could not override") and key:
        near = _near_path(key, config(key))
        if near and near != key:
            # A misspelling is likelier than a new key: '+' would add the typo.
            meant = next((n for n, k in zip(near.split("."), key.split(".")) if n != k), near)
            return f"{label}: {key} is not in the config; did you mean '{meant}' ({near})?"
        return f"{label}: {key} is not in the config; write '+{culprit.lstrip('+') if culprit else key}' to add it"
    if text.startswith("Could not append to config") and key:
        return f"{label}: {key} already exists; drop the '+' to change it, or use '++' to add or change"
    if text.startswith("Could not delete") and key:
        return f"{label}: {key} is not in the config, so it cannot be deleted; check the key"
    detail = "; ".join(lines) or type(exc).__name__
    return f"{label}: {detail}"


def _config_without(path: Path, overrides: list[str], key: str) -> dict[str, Any]:
    """The config the failing override of ``key`` was applied to, composed without it."""
    from omegaconf import OmegaConf

    others = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] != key]
    try:
        from hydra import compose, initialize_config_dir

        with initialize_config_dir(version_base=None, config_dir=str(path.parent)):
            raw = OmegaConf.to_container(compose(config_name=path.stem, overrides=others), resolve=False)
    except Exception:  # only a hint is at stake: fall back to the file as written
        raw = _load_checked_yaml(path)
    return {str(k): v for k, v in raw.items()} if isinstance(raw, dict) else {}


def _near_path(key: str, config: dict[str, Any]) -> str | None:
    """The existing dotted path ``key`` most likely misspells: each part as written or its closest."""
    node: Any = config
    found: list[str] = []
    for part in key.split("."):
        keys = {str(k): k for k in node} if isinstance(node, dict) else {}
        name = part if part in keys else closest_name(part, keys, cutoff=NEAR_KEY_CUTOFF)
        if name is None:
            return None
        found.append(name)
        node = node[keys[name]]
    return ".".join(found)


def _quoted(line: str) -> str | None:
    """The first 'quoted' key in a Hydra message."""
    parts = line.split("'")
    return parts[1] if len(parts) >= 3 else None
