"""The task contract: parse the annotation, check the response's shape, call verifiers, combine."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Iterable, Mapping

from ..core.errors import ErrorCode, ScoringError
from ..core.types import Check, Instance
from .response import Response


PROFILES: tuple[str, ...] = ("mmmg", "strict")
DEFAULT_PROFILE = "mmmg"
PROFILE_HELP = {
    "mmmg": "the published MMMG evaluator's decisions (newest version per task), only its crashes fixed",
    "strict": "the corrections this project recommends where the published rules can be gamed or are wrong",
}


def check_profile(profile: str) -> str:
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; choose one of {', '.join(PROFILES)}")
    return profile


class Task(ABC):
    """One MMMG task.  Subclasses set ``id`` and ``version`` (bump it whenever scores can change).

    Build tasks with :meth:`build`, which applies a scoring profile: ``mmmg`` reproduces the published
    evaluator, ``strict`` applies this project's corrections.  A task whose rules differ between the
    profiles overrides :meth:`profile_params` (constructor arguments per profile) or reads
    ``self.profile``; the profile is part of the verifier id and so of every result key.

    Tasks that differ from their siblings only in class attributes are not classes of their own but
    catalog rows naming a family class and those attributes (see :func:`task_variant`).
    """

    id: ClassVar[str]
    version: ClassVar[int] = 1
    binary: ClassVar[bool] = False  # scores are 0/1: ``passed`` is ``score == 1``
    profile: str = DEFAULT_PROFILE

    @classmethod
    def profile_params(cls, profile: str) -> Mapping[str, Any]:
        """Constructor arguments that realise ``profile`` (none by default)."""
        return {}

    @classmethod
    def build(cls, profile: str = DEFAULT_PROFILE) -> "Task":
        task = cls(**cls.profile_params(check_profile(profile)))
        task.profile = profile
        return task

    @property
    def strict(self) -> bool:
        return self.profile == "strict"

    @property
    def verifier_id(self) -> str:
        return f"{self.id}@{self.version}:{self.profile}"

    def params(self) -> Mapping[str, Any]:
        """Settings that change scores; part of the result key."""
        return {}

    def warm_up(self) -> None:
        """Load models and heavy imports ahead of the first item (run under the warm-up budget, not
        the item's time limit).  Optional: first use does the same lazily."""

    @abstractmethod
    def score(self, instance: Instance, response: Response) -> Check:
        """Score one response.  Raise GenerationFault for rule-breaking generations and
        ScoringError for problems that are not the generator's fault."""


# -- task families -------------------------------------------------------------------------------
RESERVED = {  # class attributes a catalog row does not set through its arguments
    "id": "the row's id sets it",
    "version": "the row's version sets it",
    "profile": "it is chosen when the task is built",
}


def declared_attributes(family: type) -> set[str]:
    """The class attributes ``family`` (or a base) declares: annotated ``ClassVar`` or assigned a
    plain value (not a method, property or other descriptor), private names left out."""
    declared: set[str] = set()
    for klass in family.__mro__:
        declared.update(name for name, kind in inspect.get_annotations(klass).items() if "ClassVar" in str(kind))
        declared.update(name for name, value in vars(klass).items() if not hasattr(value, "__get__") and not callable(value))
    return {name for name in declared if not name.startswith("_")}


VARIANTS_MODULE = "mmverify.tasks.variants"  # where catalog-row task classes are found by name (pickling)


def variant_name(task_id: str) -> str:
    """The class name of a catalog-row task: ``i_object_cot`` -> ``IObjectCot``."""
    return "".join(part.capitalize() for part in task_id.split("_"))


def task_variant(
    family: type[Task], task_id: str, *, version: int = 1, args: Iterable[tuple[str, Any]] = (), family_name: str | None = None
) -> type[Task]:
    """The task class of a catalog row: ``family`` with ``id``, ``version`` and ``args`` as class attributes.

    The family's class name (not its module, so moving code does not rescore), its own ``version``
    and ``args`` join :meth:`Task.params`, so a changed argument or a revised family changes the
    task's result keys.  An argument the family does not declare is an error (a typo would otherwise
    pass as an unused attribute), and so is a declared attribute left without a value.  The class
    lives in :mod:`mmverify.tasks.variants` by name, so built tasks pickle (a Reward travels to
    worker processes with the tasks it has built).
    """
    name = family_name or f"{family.__module__}:{family.__qualname__}"
    if not (isinstance(family, type) and issubclass(family, Task)):
        raise TypeError(f"task {task_id!r}: family {name} is not a Task class")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"task {task_id!r}: version must be an integer >= 1, got {version!r}")
    values = dict(args)
    declared = declared_attributes(family) - set(RESERVED)
    for arg in values:
        if arg not in declared:
            hint = RESERVED.get(arg) or f"it declares {', '.join(sorted(declared))}"
            raise ValueError(f"task {task_id!r}: family {name} has no argument {arg!r} ({hint})")
    missing = sorted(a for a in declared if not hasattr(family, a) and a not in values)
    if missing:
        raise ValueError(f"task {task_id!r}: family {name} needs the argument(s) {', '.join(missing)}")

    def params(self: Task) -> Mapping[str, Any]:
        return {**super(variant, self).params(), "family": family.__qualname__, "family_version": family.version, "args": dict(values)}

    class_name = variant_name(task_id)
    namespace = {"__module__": VARIANTS_MODULE, "__qualname__": class_name, "id": task_id, "version": version}
    variant = type(class_name, (family,), {**namespace, **values, "params": params})
    return variant


def require_field(instance: Instance, *names: str) -> Any:
    """The first present field among ``names`` (the published data spells some fields two ways)."""
    for name in names:
        if name in instance.data and instance.data[name] is not None:
            return instance.data[name]
    raise ScoringError(
        ErrorCode.INVALID_INSTANCE,
        f"instance {instance.id} lacks field {' / '.join(repr(n) for n in names)}",
    )
