"""Progress: a bar on a TTY, plain periodic lines (frame, fps, ETA) otherwise."""
import io

from render.progress import Progress


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_lines_off_a_tty():
    out = io.StringIO()
    p = Progress(10, label="clip.mp4", stream=out, interval=0.0)
    assert p.mode == "lines"
    for _ in range(10):
        p.update()
    p.close()
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("clip.mp4: frame 1/10 (10%), ") and " fps, ETA " in lines[0]
    assert lines[-1].startswith("clip.mp4: frame 10/10 (100%)")


def test_bar_on_a_tty():
    out = _Tty()
    p = Progress(5, label="clip.mp4", stream=out)
    assert p.mode == "bar"
    for _ in range(5):
        p.update()
    p.close()
    text = out.getvalue()
    assert "clip.mp4" in text and "5/5" in text and "\r" in text


def test_unknown_total_and_off():
    out = io.StringIO()
    p = Progress(None, label="x", stream=out, interval=0.0)
    p.update(3)
    assert "frame 3," in out.getvalue()
    quiet = io.StringIO()
    q = Progress(5, label="x", stream=quiet, mode="off")
    q.update()
    q.close()
    assert quiet.getvalue() == ""
