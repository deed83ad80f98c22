"""Errors raised by the simulator for bad configuration or impossible requests."""

from __future__ import annotations

from collections.abc import Mapping


class NamedFields:
    """A message that names settings as data, so the edge that knows their config
    paths (a Hydra app, a ``key=value`` command) names them as the user typed them
    without reading the text:

    - ``fields``: the settings the message names, the one it is about first, each
      by its name in the object checked (``n_bursts``, ``reward_scale``);
    - ``owner``: the object, if the message names it (``BurstedSyntheticConfig``,
      ``sim``), written before the first field;
    - ``template``: the message, in which each field is written ``{name}``.

    ``str()`` writes the fields as the check knows them
    (``BurstedSyntheticConfig.n_bursts must be an integer >= 0, got -1``);
    :meth:`named` writes them as config paths (``workload.params.n_bursts ...``)."""

    template: str
    fields: tuple[str, ...]
    owner: str

    def _name(self, message: str, fields: tuple[str, ...], owner: str) -> str:
        self.template, self.fields, self.owner = message, tuple(fields), owner
        return self.named({})

    def named(self, paths: Mapping[str, str], owner: bool = True) -> str:
        """The message with each field written as its entry in ``paths`` (a config
        path), or else as the check knows it: the first with its owner (unless not
        ``owner``), the others bare."""
        message = self.template
        for i, name in enumerate(self.fields):
            shown = paths.get(name) or (
                f"{self.owner}.{name}" if i == 0 and self.owner and owner else name
            )
            message = message.replace(f"{{{name}}}", shown)
        return message


class SettingWarning(UserWarning):
    """A setting that does nothing as set, or less than it asks (more windows
    than a split holds); the commands print it as one line, ``warning: ...``."""


class ConfigError(NamedFields, ValueError):
    """A setting that cannot be simulated; the message names the field and value,
    the field as data too (:class:`NamedFields`). :meth:`about` builds the usual
    one-field error. A plain message (``ConfigError(f"sim.x must be ...")``) names
    no field as data and reads as written everywhere."""

    def __init__(self, message: str, fields: tuple[str, ...] = (), owner: str = "") -> None:
        super().__init__(self._name(message, fields, owner))

    @classmethod
    def about(cls, field: str, detail: str, *others: str) -> ConfigError:
        """The error ``"<field> <detail>"``: ``field`` is ``name`` or ``owner.name``
        (``sim.max_batch``, ``TraceOptions.window_s``); ``others`` are further
        settings ``detail`` names, each written ``{name}`` in it."""
        owner, _, name = field.rpartition(".")
        return cls(f"{{{name}}} {detail}", (name, *others), owner)

    def in_owner(self, owner: str) -> ConfigError:
        """The same error about the same fields of another object (a reader's
        ``ReadOptions`` check reported as the ``TraceOptions`` the user gave)."""
        return ConfigError(self.template, self.fields, owner)


def named_message(error: BaseException, paths: Mapping[str, str], owner: bool = True) -> str:
    """``error``'s message with the fields it names as data (:class:`NamedFields`)
    written as their ``paths``; any other error's message as it is."""
    if isinstance(error, NamedFields):
        return error.named(paths, owner)
    return str(error)


class SimulationError(RuntimeError):
    """A workload that cannot run on the configured cluster (e.g. a request too big)."""
