"""The compiled row writer (``_rowtext.c``); see ``text_columns.format_rows``."""

import numpy as np

def format_rows(
    out: bytearray,
    rows: int,
    columns: tuple[tuple[bytes, str, np.ndarray, bytes | tuple[bytes, ...] | None], ...],
    end: bytes,
) -> int: ...
def float_text(v: float, /) -> bytes: ...
