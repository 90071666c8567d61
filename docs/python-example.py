# %% [markdown]
# # mbsp from Python: partition a matrix, look at the partition, solve with CG
#
# A notebook-style script (cells marked `# %%`: VS Code, Jupytext and Spyder run them one by
# one). Run it whole with
#
#     python3 docs/python-example.py [matrix.mtx] [--out partition.png]
#
# after `scripts/python-setup`. It partitions a symmetric positive definite matrix over four
# processes (Mondriaan's medium-grain method), draws the nonzeros coloured by part, checks the
# BSP multiply against scipy, and solves `A x = b` by CG on two processes.

# %%
import argparse
import os
import pathlib
import tempfile
import time

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse as sp

import mbsp

# The shared matrices: MBSP_DATA_DIR, else ../shared/data next to the repository.
repo = pathlib.Path(__file__).resolve().parent.parent
data = pathlib.Path(os.environ.get("MBSP_DATA_DIR") or repo.parent / "shared" / "data")
ap = argparse.ArgumentParser(description="partition, plot and solve with mbsp")
ap.add_argument("matrix", nargs="?", default=str(data / "matrices" / "bcsstk16.mtx"))
ap.add_argument("--out", default="partition.png", help="the plot (PNG or SVG)")
ap.add_argument("-p", type=int, default=4, help="parts of the partition")
args = ap.parse_args()

# %% [markdown]
# ## The machine and the matrix

# %%
machine = mbsp.Machine.detect()
print(machine)
print(machine.placement([2], "scattered"))
A = mbsp.read_mtx(args.matrix).tocsr()
print(f"{os.path.basename(args.matrix)}: {A.shape[0]} x {A.shape[1]}, {A.nnz} nonzeros")

# %% [markdown]
# ## Partition the nonzeros
#
# `square=True` gives `x_j` and `y_j` the same owner, as CG wants.

# %%
t = time.perf_counter()
part = mbsp.partition(A, args.p, eps=0.03, seed=1, square=True)
print(f"{part} in {time.perf_counter() - t:.2f} s")
print("nonzeros per part:", part.part_sizes().tolist())

# %% [markdown]
# ## A spy plot coloured by part

# %%
coo = A.tocoo()
fig, ax = plt.subplots(figsize=(6, 6), dpi=120)
colors = plt.get_cmap("tab10")
for s in range(part.p):
    mine = part.parts == s
    ax.scatter(coo.col[mine], coo.row[mine], s=0.05, color=colors(s % 10), label=f"part {s}", rasterized=True)
ax.set_xlim(-0.5, A.shape[1] - 0.5)
ax.set_ylim(A.shape[0] - 0.5, -0.5)
ax.set_aspect("equal")
ax.set_title(f"{os.path.basename(args.matrix)}: p = {part.p}, volume {part.volume}")
ax.legend(markerscale=40, loc="upper right", fontsize=7)
# Written whole or not at all: a temporary file renamed into place.
out = pathlib.Path(args.out)
fd, tmp = tempfile.mkstemp(dir=out.parent.resolve(), suffix=out.suffix)
os.close(fd)
fig.savefig(tmp)
os.replace(tmp, out)
print(f"plot: {out}")

# %% [markdown]
# ## The BSP multiply, checked against scipy

# %%
plan = mbsp.SpmvPlan(A, partition=part)  # the hp multiply: one superstep
x = np.random.default_rng(1).standard_normal(A.shape[1])
y = plan @ x
print(f"{plan}\nmax |plan @ x - A @ x| = {np.abs(y - A @ x).max():.2e}")

# %% [markdown]
# ## CG on two processes

# %%
b = A @ np.ones(A.shape[0])
t = time.perf_counter()
res = mbsp.cg(A, b, tol=1e-10, p=2)
print(f"{res} in {time.perf_counter() - t:.2f} s; max |x - 1| = {np.abs(res.x - 1).max():.2e}")
assert res.converged
