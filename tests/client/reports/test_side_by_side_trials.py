"""Trials that differ stay readable side by side: every column of their assertion tables is
at least 120 px wide, in the HTML report and in ``evalport view`` (which shares its style),
at 1280 and 1920 px, and nothing overflows."""

import pytest
from chromium import chromium_binary, load_page
from evalport.client.reports import HtmlReporter

NARROWEST_COLUMN = """
(() => {
  document.querySelectorAll('details').forEach((d) => { d.open = true; });
  const widths = [];
  for (const table of document.querySelectorAll('.variants table.assertions')) {
    const header = table.querySelector('tr');
    for (const cell of [...header.cells].slice(1)) {  // the mark column is a glyph
      widths.push(Math.round(cell.getBoundingClientRect().width));  // padding included
    }
  }
  const overflowing = [...document.querySelectorAll('.variants table')]
    .filter((t) => t.scrollWidth > t.clientWidth + 1).length;
  return {tables: document.querySelectorAll('.variants table.assertions').length,
          narrowest: Math.min(...widths), overflowing};
})()
"""


@pytest.mark.skipif(chromium_binary() is None, reason="chromium is not installed (CI installs it)")
@pytest.mark.parametrize("width", [1280, 1920])
async def test_differing_trials_keep_every_column_readable(tmp_path, width: int) -> None:
    from review_run import review_run

    path = tmp_path / "report.html"
    await review_run([HtmlReporter(path)])
    page = await load_page(path, width=width, checks=(NARROWEST_COLUMN,))
    assert page.errors == []
    (measured,) = page.values
    assert measured["tables"] >= 2, measured  # the coin case's two outcomes
    assert measured["narrowest"] >= 120, measured
    assert measured["overflowing"] == 0, measured
