import numpy as np, sys
sys.path.insert(0, "tests")
from test_compare_gpu_band import comparison, ROWS_AB
rng = np.random.default_rng(39)
import pandas as pd
rows = pd.concat([comparison(rng, np.linspace(1.021, 1.085, ROWS_AB)) for _ in range(40)])
bad = rows[rows.gpu_verdict != "slower"]
print(bad[["gpu_ratio","gpu_ci_low","gpu_ci_high","gpu_verdict","gpu_processes_a","gpu_processes_b"]].to_string())
