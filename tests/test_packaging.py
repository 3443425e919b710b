"""The package installs like one: a wheel, installed (not editable) into a fresh virtual
environment and run from an empty folder, finds its shipped roles and scenarios and writes
its outputs to that folder, never into the installed package.

The fresh environment takes mas from the wheel alone; its dependencies come from the test
environment's site-packages, added as a plain path (not as a site directory, so the editable
install of mas there stays invisible). Nothing is downloaded.
"""

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(folder), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(folder.glob("mas-*.whl"))
    env_dir = folder / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    return env_dir


def snapshot(folder: Path) -> dict:
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*")}


def test_the_wheel_ships_roles_and_scenarios_and_writes_to_the_working_folder(installed, tmp_path):
    package = Path(
        subprocess.check_output(
            [installed / "bin" / "python", "-c", "import mas; print(mas.__file__)"], text=True, cwd=tmp_path
        ).strip()
    ).parent
    assert installed in package.parents, f"mas was imported from {package}, not from the wheel"
    assert (package / "roles" / "solver.toml").is_file() and (package / "scenarios" / "maths" / "tasks.jsonl").is_file()
    before = snapshot(package)
    work = tmp_path / "empty"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "MAS_HOME"}
    done = subprocess.run(
        [installed / "bin" / "mas", "train", "maths", "--model", "fake", "--tasks", "4"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (work / "libraries" / "maths.json").is_file()
    assert [p.name for p in (work / "runs").iterdir()][0].startswith("maths-")
    assert snapshot(package) == before, "something was written inside the installed package"


def test_mas_home_moves_the_outputs(installed, tmp_path):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "MAS_HOME": str(home)}
    done = subprocess.run(
        [installed / "bin" / "mas", "train", "maths", "--model", "fake", "--tasks", "2", "--batch-size", "2"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (home / "libraries" / "maths.json").is_file() and (home / "runs").is_dir()
    assert list(work.iterdir()) == []


def test_a_users_own_roles_come_before_the_shipped_ones(installed, tmp_path):
    (tmp_path / "roles").mkdir()
    shipped = (ROOT / "roles" / "verifier.toml").read_text()
    (tmp_path / "roles" / "verifier.toml").write_text(
        shipped.replace("You are the verifier", "You are the careful verifier")
    )
    env = {k: v for k, v in os.environ.items() if k != "MAS_HOME"}
    code = "import mas; print(mas.load_scenario('maths').role('verifier').system_prompt)"
    shown = subprocess.run(
        [installed / "bin" / "python", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert "You are the careful verifier" in shown.stdout, shown.stderr
