"""A library call's CPU is read by its parent from outside the worker, the worker's children
included: the OCR's CPU is its tesseract child's, which the worker's own timer never sees."""

from __future__ import annotations

import pytest
from tests.functions.images import PRINTED_PAGE, encoded

from tidings.config import FunctionSettings
from tidings.sandbox.boundary import command, probe
from tidings.sandbox.pool import (
    KILLED_BY_CPU,
    WorkerCall,
    WorkerDied,
    WorkerProcess,
    publication_text,
)

OCR = WorkerCall("ocr", "builtin", "detect_printed_text")
PAGE = publication_text({"data": {"image": encoded(PRINTED_PAGE, "PNG")}})


@pytest.mark.slow
async def test_an_ocr_whose_tesseract_passes_the_budget_is_ended_from_outside() -> None:
    settings = FunctionSettings()  # the worker's own timer: 10 s of its own CPU
    worker = await WorkerProcess.start(
        command(settings, "library", bounded=probe(settings) is None)
    )
    try:
        results: dict[str, tuple[bool, str | None]] = {}
        await worker.run(PAGE, [OCR], 5.0, results)  # the first loads pytesseract: 0.3 s+
        assert results["ocr"] == (True, None)
        # its own CPU: a few hundredths of a second; tesseract's: about half a second
        with pytest.raises(WorkerDied) as died:
            await worker.run(PAGE, [OCR], 5.0, results, builtin=(0.1, 120.0))
        assert died.value.error == KILLED_BY_CPU
    finally:
        await worker.kill()
