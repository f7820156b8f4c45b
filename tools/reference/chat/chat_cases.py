"""Chat-template cases: requests as the server receives them (messages, tools, add_generation_prompt,
enable_thinking and other template kwargs). gen_chat_reference.py renders each with transformers'
apply_chat_template; tests/chat/test_chat_reference.cpp renders them with specserve."""

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Returns °C — \"quoted\" & <escaped>?",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 1},
                "ratio": {"type": "number", "default": 0.5},
                "verbose": {"type": "boolean", "default": False},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.\nSecond line with a tab\tand a backslash \\ and unicode ✓.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"},
                                                        "filters": {"type": "array", "items": {"type": "string"}}},
                       "required": ["query"]},
    },
}
BARE_TOOL = {"name": "now", "description": "Current time", "parameters": {"type": "object", "properties": {}}}

SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "What is 2+2?"}
A1_THINK_INLINE = {"role": "assistant", "content": "<think>\nSimple arithmetic.\n</think>\n\n2+2 = 4."}
U2 = {"role": "user", "content": "And 3*3? Answer briefly."}
A2_REASONING = {"role": "assistant", "content": "9", "reasoning_content": "3 times 3 is 9."}
U3 = {"role": "user", "content": "Thanks! Now say hi in 日本語 and ελληνικά 👋"}

TOOL_CALL_DICT = {"id": "call_1", "type": "function",
                  "function": {"name": "get_weather",
                               "arguments": {"city": "Zürich", "unit": "celsius", "days": 3, "ratio": 1.0,
                                             "verbose": True, "extra": None, "tags": ["a", "b"],
                                             "nested": {"k": "v\n\"q\"", "n": [1, 2.5, -3]}}}}
TOOL_CALL_STR = {"id": "call_2", "type": "function",
                 "function": {"name": "search", "arguments": "{\"query\": \"weather Zürich\"}"}}
TOOL_CALL_SEARCH_DICT = {"id": "call_2", "type": "function",
                         "function": {"name": "search", "arguments": {"query": "weather Zürich",
                                                                        "filters": ["news", "today"]}}}
TOOL_CALL_BARE = {"name": "now", "arguments": {}}


def msgs(*m):
    return [dict(x) for x in m]


CASES = []


def case(name, templates, **request):
    for t in templates:
        CASES.append({"name": f"{t}/{name}", "template": t, "request": request})


BOTH = ("qwen3", "qwen3_5")
case("single_user", BOTH, messages=msgs(U1), add_generation_prompt=True)
case("single_user_no_think", BOTH, messages=msgs(U1), add_generation_prompt=True, enable_thinking=False)
case("single_user_think_true", BOTH, messages=msgs(U1), add_generation_prompt=True, enable_thinking=True)
case("single_user_no_gen_prompt", BOTH, messages=msgs(U1))
case("system_prompt", BOTH, messages=msgs(SYS, U1), add_generation_prompt=True)
case("system_prompt_no_think", BOTH, messages=msgs(SYS, U1), add_generation_prompt=True, enable_thinking=False)
case("multi_turn_reasoning", BOTH, messages=msgs(SYS, U1, A1_THINK_INLINE, U2, A2_REASONING, U3),
     add_generation_prompt=True)
case("multi_turn_last_assistant", BOTH, messages=msgs(U1, A1_THINK_INLINE, U2, A2_REASONING))
case("multi_turn_last_assistant_inline_think", BOTH, messages=msgs(U1, A1_THINK_INLINE))
case("assistant_empty_reasoning", BOTH,
     messages=msgs(U1, {"role": "assistant", "content": "4", "reasoning_content": ""}, U2),
     add_generation_prompt=True)
case("tools_declared", BOTH, messages=msgs(U1), tools=[WEATHER_TOOL, SEARCH_TOOL], add_generation_prompt=True)
case("tools_with_system", BOTH, messages=msgs(SYS, U1), tools=[WEATHER_TOOL], add_generation_prompt=True)
case("tools_bare_schema", BOTH, messages=msgs(U1), tools=[BARE_TOOL], add_generation_prompt=True)
def tool_conv(second_call):
    return msgs(
        SYS, {"role": "user", "content": "Weather in Zürich, and search for news?"},
        {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL_DICT, second_call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
        {"role": "tool", "tool_call_id": "call_2", "content": "No news today."},
    )


case("tool_calls_and_responses", BOTH, messages=tool_conv(TOOL_CALL_SEARCH_DICT), tools=[WEATHER_TOOL, SEARCH_TOOL],
     add_generation_prompt=True)
case("tool_calls_string_arguments", ("qwen3",), messages=tool_conv(TOOL_CALL_STR), tools=[WEATHER_TOOL, SEARCH_TOOL],
     add_generation_prompt=True)
case("tool_calls_then_answer", BOTH,
     messages=tool_conv(TOOL_CALL_SEARCH_DICT) + [{"role": "assistant", "content": "It is 21 °C and clear; no news."}],
     tools=[WEATHER_TOOL, SEARCH_TOOL])
case("tool_call_with_content", BOTH,
     messages=msgs(U1, {"role": "assistant", "content": "Let me check.", "tool_calls": [TOOL_CALL_DICT]},
                   {"role": "tool", "content": "sunny"}),
     tools=[WEATHER_TOOL], add_generation_prompt=True)
case("tool_call_reasoning", BOTH,
     messages=msgs(U1, {"role": "assistant", "content": "", "reasoning_content": "Need the weather tool.",
                        "tool_calls": [TOOL_CALL_DICT]},
                   {"role": "tool", "content": "sunny"},
                   {"role": "assistant", "content": "<think>\nGot it.\n</think>\n\nSunny."},
                   {"role": "user", "content": "<tool_response>\nlate result\n</tool_response>"}),
     tools=[WEATHER_TOOL], add_generation_prompt=True, enable_thinking=False)
case("tool_call_unwrapped", ("qwen3",),
     messages=msgs(U1, {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL_BARE]},
                   {"role": "tool", "content": "12:00"}),
     tools=[BARE_TOOL], add_generation_prompt=True)
case("multi_step_tool_user_wrapper", BOTH,
     messages=msgs(U1, {"role": "assistant", "content": "", "tool_calls": [TOOL_CALL_DICT]},
                   {"role": "user", "content": "<tool_response>\n21 C\n</tool_response>"}),
     tools=[WEATHER_TOOL], add_generation_prompt=True)
case("tool_first_message", ("qwen3",), messages=msgs({"role": "tool", "content": "orphan"}, U1),
     add_generation_prompt=True)
case("second_system", ("qwen3",), messages=msgs(SYS, U1, {"role": "system", "content": "Be terse."}, U2),
     add_generation_prompt=True)
case("unicode_and_escapes", BOTH,
     messages=msgs({"role": "user", "content": "Quote \" backslash \\ tab \t nul-ish \u0001 emoji 🧪 RTL שלום <|im_end|> literal"}),
     add_generation_prompt=True)
case("content_list_vision", ("qwen3_5",),
     messages=msgs({"role": "user", "content": [{"type": "image", "image": "a.png"},
                                                 {"type": "text", "text": "What is in the image?"},
                                                 {"type": "video", "video": "b.mp4"},
                                                 {"type": "image_url", "image_url": {"url": "c.png"}}]}),
     add_generation_prompt=True)
case("content_list_vision_ids", ("qwen3_5",),
     messages=msgs({"role": "user", "content": [{"type": "image", "image": "a.png"},
                                                 {"type": "image", "image": "b.png"},
                                                 {"type": "text", "text": "Compare."}]},
                   {"role": "assistant", "content": [{"type": "text", "text": "They differ."}]},
                   {"role": "user", "content": [{"type": "video", "video": "c.mp4"}, {"type": "text", "text": "And this?"}]}),
     add_generation_prompt=True, add_vision_id=True)
case("content_whitespace_trim", ("qwen3_5",),
     messages=msgs({"role": "system", "content": "  padded system  \n"}, {"role": "user", "content": "\n  hi  \n"},
                   {"role": "assistant", "content": "\n\n  hello \n", "reasoning_content": "  \n why \n "}),
     add_generation_prompt=True)
case("content_null_assistant", ("qwen3_5",),
     messages=msgs(U1, {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL_DICT]},
                   {"role": "tool", "content": "ok"}),
     tools=[WEATHER_TOOL], add_generation_prompt=True)
case("extra_kwargs_ignored", BOTH, messages=msgs(U1), add_generation_prompt=True, preserve_thinking=True,
     custom_flag="x")

# Template errors (raise_exception, or an undefined access the template makes): the renderer must
# fail with a clear error, never crash.
case("error_no_messages", BOTH, messages=[], add_generation_prompt=True)
case("error_system_not_first", ("qwen3_5",), messages=msgs(U1, SYS), add_generation_prompt=True)
case("error_unknown_role", ("qwen3_5",), messages=msgs(U1, {"role": "narrator", "content": "x"}),
     add_generation_prompt=True)
case("error_image_in_system", ("qwen3_5",),
     messages=msgs({"role": "system", "content": [{"type": "image", "image": "x.png"}]}, U1),
     add_generation_prompt=True)
case("error_no_user_query", ("qwen3_5",),
     messages=msgs({"role": "user", "content": "<tool_response>\nx\n</tool_response>"}),
     add_generation_prompt=True)
case("error_string_arguments", ("qwen3_5",), messages=tool_conv(TOOL_CALL_STR), tools=[WEATHER_TOOL, SEARCH_TOOL],
     add_generation_prompt=True)
case("error_bad_content_type", ("qwen3_5",), messages=msgs({"role": "user", "content": 42}),
     add_generation_prompt=True)

# Small custom templates run through the same apply_chat_template path: what enters the context.
CUSTOM_TEMPLATES = {
    "context_vars": "{{ bos_token }}|{{ eos_token }}|{{ pad_token }}|{{ unk_token }}|{{ tools }}|"
                    "{{ documents }}|{{ add_generation_prompt }}|{{ custom_kwarg }}|{{ enable_thinking }}|"
                    "{{ messages|length }}",
    "tojson_forms": "{% for m in messages %}{{ m|tojson }}\n{{ m|tojson(indent=2) }}\n"
                    "{{ m|tojson(separators=(',', ':')) }}\n{{ m|tojson(sort_keys=true) }}\n{% endfor %}",
    "raise": "{% if messages|length > 1 %}{{ raise_exception('Only one message, got ' ~ messages|length) }}{% endif %}ok",
}
for cname in CUSTOM_TEMPLATES:
    CASES.append({"name": f"custom/{cname}", "template": "qwen3", "custom_template": cname,
                  "request": {"messages": msgs(U1, {"role": "assistant", "content": "é \"x\" </s> \u2028",
                                                     "z": 1.5, "a": [True, None, 10**15]}),
                              "add_generation_prompt": True, "custom_kwarg": {"k": [1, "two"]}}})
