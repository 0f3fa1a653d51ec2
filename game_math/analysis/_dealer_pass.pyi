import numpy as np
import numpy.typing as npt

_I = npt.NDArray[np.int64]
_F = npt.NDArray[np.float64]

def block(levels: _I, runs: _I, child: _I, factor: _I, terminal: _I, peeked: _I,
          out_start: _I, out_index: _I, term_source: _I, term_held: _F, shoe: _F,
          removed: _I, out: _F, cap: int, work: _F, /) -> None: ...

def quantities(values: _F, rows: _I, weights: _F, out: _F, /) -> None: ...
