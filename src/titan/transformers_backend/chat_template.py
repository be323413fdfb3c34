"""Chat templates for titan's SFT, rendered in titan's embedded interpreter by Jinja2 itself, in
the environment Hugging Face Transformers renders them in (apply_chat_template): a sandbox with
trim_blocks and lstrip_blocks, the loopcontrols extension, a tojson filter that keeps non-ASCII
text and does not escape HTML, and the raise_exception and strftime_now globals."""
import json
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def _raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _strftime_now(format):
    return datetime.now().strftime(format)


def compile_template(source):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(source)


def render(template, special_tokens_json, messages_json, tools_json, add_generation_prompt,
           variables_json="{}"):
    """The text of one conversation (JSON in, so that titan passes plain strings). The extra
    variables come after the special tokens, as apply_chat_template's keyword arguments do."""
    tools = json.loads(tools_json)
    variables = {**json.loads(special_tokens_json), **json.loads(variables_json)}
    return template.render(messages=json.loads(messages_json), tools=tools, documents=None,
                           add_generation_prompt=add_generation_prompt, **variables)
