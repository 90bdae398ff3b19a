"""An edited prompt changes the result key of the tasks that ask it, version bumped or not."""

from __future__ import annotations

from dataclasses import replace

from mmverify.tasks.catalog import TASK_REGISTRY
from mmverify.verifiers.vlm.coherence_templates import COHERENCE_TEMPLATE_KEY, COHERENCE_TEMPLATE_VERSION, COHERENCE_TEMPLATES
from mmverify.verifiers.vlm.templates import (
    CODE_TEMPLATE_KEY,
    TEMPLATE_KEY,
    TEMPLATE_VERSION,
    TEMPLATES,
    wording_key,
)


def test_the_key_follows_every_word_of_every_template():
    assert TEMPLATE_KEY == wording_key(TEMPLATE_VERSION, TEMPLATES.values())
    assert COHERENCE_TEMPLATE_KEY == wording_key(COHERENCE_TEMPLATE_VERSION, COHERENCE_TEMPLATES.values())
    for template_id, template in TEMPLATES.items():
        edited = {**TEMPLATES, template_id: replace(template, text=template.text + " ")}
        assert wording_key(TEMPLATE_VERSION, edited.values()) != TEMPLATE_KEY, template_id
    assert wording_key(TEMPLATE_VERSION + 1, TEMPLATES.values()) != TEMPLATE_KEY
    reordered = dict(reversed(list(TEMPLATES.items())))
    assert wording_key(TEMPLATE_VERSION, reordered.values()) == TEMPLATE_KEY  # the set of templates, not their order


def test_judged_tasks_put_the_wording_keys_in_their_parameters():
    assert TASK_REGISTRY.get("i_object_include").build().params()["templates"] == TEMPLATE_KEY
    coherence = TASK_REGISTRY.get("it_coherence_count").build().params()
    assert coherence["templates"] == TEMPLATE_KEY and coherence["coherence_templates"] == COHERENCE_TEMPLATE_KEY
    assert TASK_REGISTRY.get("it_coherence_code").build().params()["code_templates"] == CODE_TEMPLATE_KEY
