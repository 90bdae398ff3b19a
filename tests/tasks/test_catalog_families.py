"""Catalog rows that name a family class with arguments instead of a class of their own.

EXPECTED records what the one-line classes these rows replaced declared (their id, their effective
version -- inherited ones included -- and the class attributes they set or inherited), written down
from their source before it was removed.  The rows must rebuild exactly those tasks.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from typing import Any

import pytest

from mmverify.core.hashing import digest_of
from mmverify.core.types import Check
from mmverify.tasks.base import PROFILES, Task, task_variant
from mmverify.tasks.catalog import CATALOG, TASK_REGISTRY, TASKS, TaskInfo, family_factory, markdown_table, task_args

_T = "mmverify.tasks"
_WHOLE_CLIP = {"any_field": False, "binary": True}
_OBJECT_EDIT = {"component": "objects_present", "inverted": False, "margin_divisor": 20, "roles": ("default",)}
_REFERENCE_EDIT = {"margin_divisor": 10, "needed": ("bbox", "image_list", "ref_image_list")}

# task id -> (family, version, class attributes), from the removed classes
EXPECTED: dict[str, tuple[str, int, dict[str, Any]]] = {
    "i_object_include": (f"{_T}.image_judged:SceneObjects", 1, {"component": "objects_present", "inverted": False}),
    "i_object_exclude": (f"{_T}.image_judged:SceneObjects", 2, {"component": "objects_absent", "inverted": True}),
    "i_object_attribute": (f"{_T}.image_judged:Existence", 1, {"roles": ("default",)}),
    "i_object_cot": (f"{_T}.image_judged:Existence", 1, {"roles": ("default",)}),
    "i_object_commonsense": (f"{_T}.image_judged:Existence", 1, {"roles": ("default",)}),
    "i_relation_two": (f"{_T}.image_judged:Existence", 1, {"roles": ("default",)}),
    "i_relation_all": (f"{_T}.image_judged:Existence", 1, {"roles": ("default",)}),
    "i_edit_object_add": (f"{_T}.editing:ObjectEdit", 1, _OBJECT_EDIT),
    "i_edit_object_remove": (f"{_T}.editing:ObjectEdit", 2, {**_OBJECT_EDIT, "component": "objects_absent", "inverted": True}),
    "i_edit_object_modify": (f"{_T}.editing:ObjectEdit", 1, _OBJECT_EDIT),
    "i_edit_object_attribute": (f"{_T}.editing:ObjectEdit", 1, _OBJECT_EDIT),
    "i_edit_text_add": (f"{_T}.editing:TextEdit", 2, {"margin_divisor": 20, "roles": ("ocr",)}),
    "i_edit_text_alter": (f"{_T}.editing:TextEdit", 2, {"margin_divisor": 20, "roles": ("ocr",)}),
    "i_edit_add": (f"{_T}.editing:ReferenceEdit", 1, _REFERENCE_EDIT),
    "i_edit_color": (f"{_T}.editing:ReferenceEdit", 1, _REFERENCE_EDIT),
    "i_consistency_semantic": (f"{_T}.consistency_objects:ObjectSequence", 1, {"roles": ("default",)}),
    "i_consistency_compose": (f"{_T}.consistency_objects:ObjectSequence", 1, {"roles": ("default",)}),
    "i_consistency_decompose": (f"{_T}.consistency_objects:ObjectSequence", 1, {"roles": ("default",)}),
    "i_consistency_3d_object": (f"{_T}.consistency_views:ViewConsistency", 1, {"binary": False}),
    "i_consistency_3d_scene": (f"{_T}.consistency_views:ViewConsistency", 1, {"binary": False}),
    "i_structure": (f"{_T}.structure:OrderTask", 1, {"binary": True}),
    "a_structure": (f"{_T}.structure:OrderTask", 1, {"binary": True}),
    "a_sound_cot": (
        f"{_T}.sound:WholeClip", 2,
        {**_WHOLE_CLIP, "reference_set": "esc50", "fields": ("target",), "default_threshold": 0.68, "absent": False},
    ),
    "a_music_instrument": (
        f"{_T}.sound:WholeClip", 2,
        {**_WHOLE_CLIP, "reference_set": "openmic", "fields": ("instrument",), "default_threshold": 0.62, "absent": False},
    ),
    "a_music_exclude": (
        f"{_T}.sound:WholeClip", 2,
        {**_WHOLE_CLIP, "reference_set": "openmic", "fields": ("instrument",), "default_threshold": 0.62, "absent": True},
    ),
    "a_music_genre": (
        f"{_T}.sound:WholeClip", 2,
        {**_WHOLE_CLIP, "reference_set": "gtzan", "fields": ("genre",), "default_threshold": 0.69, "absent": False},
    ),
    "a_speech_modify": (f"{_T}.speech:SpeechConstraint", 2, {"binary": True, "language": "en"}),
}  # fmt: skip

FAMILY_MODULES = sorted({family.split(":")[0] for family, _, _ in EXPECTED.values()})


def load(target: str) -> type:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def key_of(task: Task) -> str:
    """The task's part of a result key, as pipelines/plan.py builds it."""
    return digest_of(task.verifier_id, dict(task.params()))


def test_the_family_rows_are_exactly_the_replaced_classes():
    assert {info.id for info in TASKS if info.family} == set(EXPECTED)
    for task_id, (family, version, _) in EXPECTED.items():
        info = CATALOG[task_id]
        assert (info.family, info.version, info.impl) == (family, version, None)
        assert info.implemented and info.scoring_class == family


@pytest.mark.parametrize("task_id", sorted(EXPECTED))
def test_a_family_row_builds_the_task_its_class_was(task_id: str):
    family_name, version, attributes = EXPECTED[task_id]
    family = load(family_name)
    cls = TASK_REGISTRY.get(task_id)
    assert TASK_REGISTRY.get(f"task:{task_id}") is cls  # built once
    assert issubclass(cls, family) and cls.__bases__ == (family,)
    assert (cls.id, cls.version) == (task_id, version)
    assert {name: getattr(cls, name) for name in attributes} == attributes
    assert cls.__module__ == "mmverify.tasks.variants" and cls.__name__ == cls.__qualname__ and cls.__name__.isidentifier()
    assert getattr(importlib.import_module(cls.__module__), cls.__name__) is cls  # found by name: it pickles
    for profile in PROFILES:
        task = cls.build(profile)
        assert task.verifier_id == f"{task_id}@{version}:{profile}"
        params = task.params()
        assert params["family"] == family.__qualname__ and params["family_version"] == family.version
        assert params["args"] == dict(CATALOG[task_id].args)


def test_arguments_reach_scoring():
    class AlwaysYes:
        """A judge session where every object is there."""

        def yes(self, template: str, **_: Any) -> bool:
            return True

        def check(self, score: float, components: dict[str, float], **evidence: Any) -> Check:
            return Check(score=score, components=dict(components), evidence=evidence)

    spec = ("a park", ["a dog", "a kite"])
    include = TASK_REGISTRY.get("i_object_include")().judge(spec, AlwaysYes())
    exclude = TASK_REGISTRY.get("i_object_exclude")().judge(spec, AlwaysYes())
    assert (include.score, include.components) == (1.0, {"scene": 1.0, "objects_present": 1.0})
    assert (exclude.score, exclude.components) == (0.0, {"scene": 1.0, "objects_absent": 0.0})


def test_an_argument_the_family_does_not_declare_is_an_error():
    from mmverify.tasks.image_judged import SceneObjects

    with pytest.raises(ValueError, match=r"'i_typo'.*'inverterd'"):
        task_variant(SceneObjects, "i_typo", args=task_args(component="x", inverterd=True))
    with pytest.raises(ValueError, match="'judge'"):  # a method is not an argument
        task_variant(SceneObjects, "i_typo", args=task_args(component="x", judge=None))
    with pytest.raises(ValueError, match="'version'.*row's version"):
        task_variant(SceneObjects, "i_typo", args=task_args(component="x", version=3))
    with pytest.raises(ValueError, match="'i_typo'.*component"):  # declared without a value: the row must set it
        task_variant(SceneObjects, "i_typo")
    with pytest.raises(ValueError, match="version"):
        task_variant(SceneObjects, "i_typo", version=0, args=task_args(component="x"))
    # a bad row fails on first use, naming the task and the argument
    row = TaskInfo("i_bad", "Bad", "image", "-", family=f"{_T}.image_judged:Existence", args=task_args(componnet="x"))
    with pytest.raises(ValueError, match=r"'i_bad'.*'componnet'"):
        family_factory(row)()


def test_rows_are_immutable_and_say_one_thing():
    assert task_args(b=1, a=(2,)) == (("a", (2,)), ("b", 1))
    with pytest.raises(ValueError, match="immutable"):
        TaskInfo("i_x", "X", "image", "-", family=f"{_T}.image_judged:Existence", args=task_args(fields=["target"]))
    with pytest.raises(ValueError, match="not both"):
        TaskInfo("i_x", "X", "image", "-", impl=f"{_T}.image_judged:ObjectCount", family=f"{_T}.image_judged:Existence")
    with pytest.raises(ValueError, match="family rows"):
        TaskInfo("i_x", "X", "image", "-", impl=f"{_T}.image_judged:ObjectCount", version=2)


def test_a_changed_argument_or_version_changes_the_result_key():
    from mmverify.tasks.sound import WholeClip

    row = task_args(reference_set="esc50", fields=("target",), default_threshold=0.68)
    base = task_variant(WholeClip, "a_sound_cot", version=2, args=row).build()
    assert key_of(base) == key_of(TASK_REGISTRY.get("a_sound_cot").build())
    for changed in (
        task_variant(WholeClip, "a_sound_cot", version=2, args=task_args(**{**dict(row), "default_threshold": 0.7})),
        task_variant(WholeClip, "a_sound_cot", version=2, args=task_args(**{**dict(row), "fields": ("start",)})),
        task_variant(WholeClip, "a_sound_cot", version=3, args=row),
    ):
        assert key_of(changed.build()) != key_of(base)
    # another family with the same arguments is another task
    from mmverify.tasks.consistency_objects import ObjectSequence
    from mmverify.tasks.image_judged import Existence

    assert key_of(task_variant(Existence, "i_x").build()) != key_of(task_variant(ObjectSequence, "i_x").build())


def test_tasks_with_a_class_of_their_own_keep_their_params():
    task = TASK_REGISTRY.get("a_speech_constraint").build()
    assert not {"family", "family_version", "args"} & set(task.params())


def test_listing_the_catalog_imports_no_family():
    code = (
        "import sys, mmverify.tasks.catalog as c\n"
        "c.markdown_table(); [c.task_info(t) for t in c.CATALOG]; list(c.TASK_REGISTRY)\n"
        "print(','.join(sorted(m for m in sys.modules if m.startswith('mmverify.tasks.') or m == 'numpy')))\n"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded.split(",") == ["mmverify.tasks.catalog"], loaded
    assert not set(FAMILY_MODULES) & set(loaded.split(","))


def test_markdown_table_lists_family_rows_as_implemented():
    table = markdown_table()
    for task_id in EXPECTED:
        assert f"| `{task_id}` |" in table and table.split(f"| `{task_id}` |")[1].split("\n")[0].endswith("| implemented |")
