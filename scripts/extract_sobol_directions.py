"""Write tessera/rand/data/joe_kuo_1024.npz: the first 1024 dimensions of Joe & Kuo's Sobol'
direction-number data (new-joe-kuo-6.21201), taken from the copy SciPy ships.

Run once by a developer (SciPy ≥ 1.7): python scripts/extract_sobol_directions.py
Source: S. Joe and F. Y. Kuo, "Constructing Sobol sequences with better two-dimensional
projections", SIAM J. Sci. Comput. 30, 2635–2654 (2008); data at https://web.maths.unsw.edu.au/~fkuo/sobol/
"""

from pathlib import Path

import numpy as np
import scipy.stats

source = Path(scipy.stats.__file__).parent / "_sobol_direction_numbers.npz"
data = np.load(source)
target = Path(__file__).resolve().parents[1] / "tessera" / "rand" / "data" / "joe_kuo_1024.npz"
np.savez_compressed(target, poly=data["poly"][:1024].astype(np.uint32),
                    vinit=data["vinit"][:1024].astype(np.uint32))
print(f"wrote {target} from {source}")
