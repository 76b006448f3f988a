# SPDX-License-Identifier: Apache-2.0
"""A matplotlib backend for sandboxes: `plt.show()` saves the open figures as PNG files.

Selected with MPLBACKEND=module://sandboxd.plots, which run_python's runner sets when this package
is on sys.path and MPLBACKEND is not set already (so code that picks a backend keeps it).
Drawing is Agg's. `plt.show()` saves each open figure, in the order they were opened, to the
next free /workspace/out/figure-N.png (N counts up across the run, from 1) and closes them all;
`fig.show()` saves that one figure and leaves it open. When the code ends, the runner saves the
figures still open the same way (save_at_exit). A file is always created anew (O_EXCL,
O_NOFOLLOW): a name that exists, a file or a link, is skipped, never replaced or followed.
"""
import os

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

OUT_DIR = "/workspace/out"
_next = 1  # the N of the next figure-N.png to try


def save_figure(figure):
    """Save one figure as the next free OUT_DIR/figure-N.png; returns the path."""
    global _next
    os.makedirs(OUT_DIR, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        path = "%s/figure-%d.png" % (OUT_DIR, _next)
        _next += 1
        try:
            fd = os.open(path, flags, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            figure.savefig(f, format="png")
        return path


def save_open_figures(unsaved_only=False):
    """Save every open pyplot figure (unsaved_only: those the code never saved itself) and close
    them all; returns (paths, errors)."""
    from matplotlib._pylab_helpers import Gcf

    paths, errors = [], []
    for manager in Gcf.get_all_fig_managers():
        if unsaved_only and getattr(manager.canvas.figure, "_sandboxd_saved", False):
            continue
        try:
            paths.append(save_figure(manager.canvas.figure))
        except Exception as e:  # the others are still saved
            errors.append((manager.num, e))
    Gcf.destroy_all()
    return paths, errors


def show(*args, **kwargs):
    """plt.show(): save the open figures, close them; the first failure is raised after."""
    paths, errors = save_open_figures()
    if errors:
        raise errors[0][1]


def save_at_exit():
    """The runner's end-of-run hook: figures still open are saved, unless the code saved them itself
    (savefig: it chose their name); failures are one line each."""
    import sys

    try:
        _, errors = save_open_figures(unsaved_only=True)
    except Exception as e:
        errors = [("?", e)]
    for num, e in errors:
        print("sandboxd: figure %s not saved: %s: %s" % (num, type(e).__name__, e), file=sys.stderr)


class FigureManager(FigureManagerBase):
    def show(self):
        save_figure(self.canvas.figure)


class FigureCanvas(FigureCanvasAgg):
    manager_class = FigureManager

    def print_figure(self, *args, **kwargs):
        # savefig() of the code's: the figure is where the code wanted it, not saved again at exit.
        self.figure._sandboxd_saved = True
        return super().print_figure(*args, **kwargs)
