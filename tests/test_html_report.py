"""gpuprov diagnose --report: one self-contained page, rendered in a real headless Chromium."""
import os
import re
import shutil
import subprocess

import pytest

from gpuprov import diagnose as diag
from gpuprov.diagnose import html_report
from gpuprov.diagnose.snapshot import UtilizationSample
from testlib import REPO

FIXTURE = os.path.join(REPO, "tests", "fixtures", "diagnose", "application_cpu_bound")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Flags that keep a headless Chromium off the network and first-run work (machines/python.md).
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def report_file(gpuprov, tmp_path):
    path = tmp_path / "report.html"
    code, out, err = gpuprov("diagnose", "--snapshot", FIXTURE, "--report", str(path))
    assert code == 0, err
    assert "Report: %s" % path in out
    return path


def test_page_is_self_contained(report_file):
    text = report_file.read_text()
    # No address to fetch: no src/href at all, and the policy forbids any fetch anyway.
    assert not re.search(r"\b(src|href)\s*=", text)
    assert "default-src 'none'" in text
    snapshot = diag.load_snapshot(FIXTURE)
    gpus = {s.index for s in snapshot.utilization["gpu-l40s-01"]}
    # Two charts (SM activity, memory) with one line per GPU.
    assert text.count('class="series"') == 2 * len(gpus)
    assert "gpu-l40s-01" in text and "application" in text and "Remedy:" in text


def test_text_from_the_input_is_escaped():
    report = {"source": "<img src=x onerror=alert(1)>", "summary": {"gpu_nodes": 0, "nodes": 0, "gpus": 0,
                                                                     "pending_gpu_pods": 0},
              "nodes": [], "pods": [], "notes": ["</script><script>alert(2)</script>"], "not_run": []}
    page = html_report.render(report, diag.Snapshot(nodes=[], pods=[], events=[]))
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "</script><script>alert(2)" not in page


def test_long_recordings_are_averaged_into_buckets():
    samples = [UtilizationSample("2026/11/30 %02d:%02d:00.000" % (minute // 60, minute % 60), 0, "L40S", 100.0 * (
        minute % 2), 1000.0, 100.0 * (minute % 2)) for minute in range(1440)]
    (device,) = html_report.series_by_device(samples).values()
    assert len(device["points"]) == html_report.MAX_POINTS
    # Each bucket averages busy and idle minutes: the mean survives, no point is invented.
    means = [point[1] for point in device["points"]]
    assert 45 <= sum(means) / len(means) <= 55 and max(means) <= 100


needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install "
                                                              "chromium; scripts/setup.sh does it as root)")


def dump_dom(page, profile):
    result = subprocess.run([CHROMIUM] + FLAGS + ["--user-data-dir=%s" % profile, "--enable-logging=stderr",
                                                 "--v=0", "--dump-dom", page.as_uri()],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    html_tag = re.search(r"<html[^>]*>", result.stdout).group(0)
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    return html_tag, console


@needs_chromium
def test_chromium_renders_the_charts_without_errors(report_file, tmp_path):
    html_tag, console = dump_dom(report_file, tmp_path / "profile")
    expected = report_file.read_text().count('class="series"')
    # The page's own script ran (DOMContentLoaded) and counted the chart lines in the live DOM.
    assert 'data-rendered="%d"' % expected in html_tag
    assert "data-errors" not in html_tag
    assert console == []
    profile = tmp_path / "profile"
    shot = tmp_path / "report.png"
    subprocess.run([CHROMIUM] + FLAGS + ["--user-data-dir=%s" % profile, "--window-size=1300,1600",
                                         "--screenshot=%s" % shot, report_file.as_uri()],
                   capture_output=True, text=True, timeout=120, check=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20000


@needs_chromium
def test_the_error_check_sees_a_broken_script(report_file, tmp_path):
    broken = tmp_path / "broken.html"
    broken.write_text(report_file.read_text().replace("</body>", "<script>notDefinedAnywhere();</script></body>"))
    html_tag, console = dump_dom(broken, tmp_path / "profile")
    assert 'data-errors="Uncaught ReferenceError: notDefinedAnywhere is not defined"' in html_tag
    assert any("notDefinedAnywhere" in line for line in console)
