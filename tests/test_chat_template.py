"""A GGUF's chat template renders as Jinja's sandbox renders it, within a size and a time limit."""

from __future__ import annotations

import time

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from evaltrail.backends import chat_template
from evaltrail.backends.chat_template import BoundedTemplate
from evaltrail.errors import EvaltrailError

WHERE = "params.yaml: model.m.chat_template"
# SmolLM2-Instruct's template, and one with the macros, namespaces and filters larger templates use
SMOL = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
RICH = (
    "{{ bos_token }}{% macro turn(role, text) %}<start_of_turn>{{ role }}\n{{ text | trim }}<end_of_turn>\n"
    "{% endmacro %}{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "{{ turn('model' if m['role'] == 'assistant' else m['role'], m['content']) }}{% endfor %}"
    "{{ '%d turn(s)' % ns.n }} {{ '{} of {}'.format(1, messages | length) }}{{ '-' * 3 }}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
CONTEXT = {
    "messages": [{"role": "user", "content": "  Who wrote 'Hamlet'? 1234567 %s {} \udcff "}],
    "add_generation_prompt": True,
    "bos_token": "<bos>",
    "eos_token": "<eos>",
}


@pytest.mark.parametrize("source", [SMOL, RICH], ids=["smollm2", "macros"])
def test_renders_byte_for_byte_as_the_plain_sandbox(source):
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).from_string(source)
    assert BoundedTemplate(source, WHERE).render(**CONTEXT) == plain.render(**CONTEXT)


def test_a_long_prompt_within_the_budget_renders():
    long = {**CONTEXT, "messages": [{"role": "user", "content": "word " * 400_000}]}  # 2M characters
    assert len(BoundedTemplate(SMOL, WHERE).render(**long)) > 2_000_000


@pytest.mark.parametrize(
    "source, what",
    [
        ("{{ 'a' * 10**8 }}", "asked for a sequence of 100000000 items (more than 1000000)"),
        ("{{ messages[0]['content'] * 10**6 }}", "asked for a sequence of"),
        ("{{ 'x' | center(10**9) }}", "asked for an operation of size 1000000000 (more than 1000000)"),
        ("{{ 'x'.ljust(10**9) }}", "asked for an operation of size 1000000000"),
        ("{{ '%1000000000s' % 'x' }}", "asked for a format width of 1000000 characters or more"),
        ("{{ '{:>1000000000}'.format('x') }}", "asked for a format width of 1000000 characters or more"),
        ("{{ 7 ** 99999999 }}", "asked for a power of more than 64 kbit"),
        ("{% for i in range(99999) %}{{ 'a' * 99999 }}{% endfor %}", "made more than 1000"),
    ],
    ids=["repeat", "repeat-prompt", "filter-width", "method-width", "percent-width", "format-width", "power", "flood"],
)
def test_a_template_making_too_much_stops_with_one_line(source, what):
    t0 = time.monotonic()
    with pytest.raises(EvaltrailError) as err:
        BoundedTemplate(source, WHERE).render(**CONTEXT)
    message = str(err.value)
    assert message.startswith(f"{WHERE}: the GGUF's tokenizer.chat_template {what}") and "\n" not in message
    assert message.endswith(
        "rendering one prompt; the template (data from the weights file) is broken or hostile: "
        "set chat_template: false or use other weights"
    )
    assert time.monotonic() - t0 < 3


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",  # nothing to intercept
        "{% for i in range(99999) %}{% for j in range(99999) %}{{ '' }}{% endfor %}{% endfor %}",
    ],
    ids=["empty-loops", "loops"],
)
def test_a_template_running_too_long_stops_at_the_time_limit(source, monkeypatch):
    monkeypatch.setattr(chat_template, "MAX_SECONDS", 0.3)
    t0 = time.monotonic()
    with pytest.raises(EvaltrailError, match=r"chat_template ran longer than 0\.3 s rendering one prompt"):
        BoundedTemplate(source, WHERE).render(**CONTEXT)
    assert time.monotonic() - t0 < 2


def test_the_callers_tracer_is_restored():
    import sys

    seen = []

    def tracer(frame, event, arg):
        seen.append(event)

    sys.settrace(tracer)
    try:
        BoundedTemplate(SMOL, WHERE).render(**CONTEXT)
        restored = sys.gettrace()
    finally:
        sys.settrace(None)
    assert restored is tracer
