"""A case's ``source`` never needs to read the file it was compiled from."""

from __future__ import annotations

from pathlib import Path

from evalport.client import cases_from


def test_a_case_compiled_from_a_string_under_an_unrelated_file_name(tmp_path: Path) -> None:
    # README examples are compiled with filename="README.md": reading that file as Python
    # (inspect.getsourcelines) raises tokenize errors at arbitrary line numbers.
    readme = tmp_path / "README.md"
    readme.write_text("# Title\n\n```python\nprint((\n```\n")
    code = (
        "from evalport.client._core._cases import eval_case\n"
        "\n"
        "@eval_case('compiled from a string')\n"
        "async def refund(ctx):\n"
        "    await ctx.send('hi')\n"
    )
    namespace: dict[str, object] = {}
    exec(compile(code, str(readme), "exec"), namespace)
    (case,) = cases_from(namespace["refund"])  # type: ignore[arg-type]
    assert case.source == f"{readme}:3"


def test_a_case_defined_here_points_at_its_line() -> None:
    from evalport.client import eval_case

    @eval_case("here")
    async def here(ctx: object) -> None:
        return None

    (case,) = cases_from(here)
    file, line = case.source.rsplit(":", 1)
    assert file == __file__
    assert int(line) > 0
