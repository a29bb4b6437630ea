"""Files the commands write for the user (fit -w, trial -w and --report)."""
import os
import tempfile


def write_atomically(path, text):
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename: a
    reader sees the old file or the new one, never half of one."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
