"""Production conversations of the support agent, evaluated from their logs (no agent runs).

Each file under conversations/ becomes a case of its own: ``evalport run examples/logged``.
"""

from evalport.client import eval_case


@eval_case("logged support conversation {file}", conversations="conversations/*.json*")
async def support_conversation(ctx):
    ctx.succeeded()  # the conversation ended with an answer, not mid-tool-call
    ctx.no_failed_actions()
    ctx.max_tool_calls(3)
