"""The lock files, pyproject.toml and environment.yml agree; installed-vs-locked is reported in one line each."""

import tomllib

import pytest
from packaging.requirements import Requirement

from kimina_edu import environment
from kimina_edu.environment import LAB_LOCK, LOCK, REPO, VERL_LOCK, canonical, environment_yml, read_lock


def _requirements(extras: tuple[str, ...] = ("test",)) -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return [r for r in reqs if r.marker is None or r.marker.evaluate()]


@pytest.mark.parametrize(("lock", "extras"), [(LOCK, ("test",)), (LAB_LOCK, ("test", "lab"))])
def test_every_pyproject_dependency_is_locked_within_its_range(lock, extras):
    pins = read_lock(lock)
    for req in _requirements(extras):
        name = canonical(req.name)
        assert name in pins, f"{req.name} is in pyproject.toml but not in {lock.name}: run `make lock`"
        assert req.specifier.contains(pins[name][0], prereleases=True), \
            f"{lock.name} pins {name}=={pins[name][0]}, outside pyproject's {req.specifier}: run `make lock`"


def test_lab_lock_agrees_with_the_course_lock():
    course, lab = read_lock(LOCK), read_lock(LAB_LOCK)
    assert {k: v for k, v in lab.items() if k in course} == course


def test_verl_lock_satisfies_its_requirements_and_keeps_torch():
    pins = read_lock(VERL_LOCK)
    for line in (REPO / "kimina_edu/verl/requirements-verl.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            req = Requirement(line)
            assert req.specifier.contains(pins[canonical(req.name)][0]), line
    assert pins["torch"][0] == read_lock(LOCK)["torch"][0] == "2.13.0"
    assert not any(name.startswith("nvidia-") for name in pins), "the lock must not pull a CUDA build"


def test_environment_yml_is_generated_from_the_lock():
    assert (REPO / "environment.yml").read_text() == environment_yml(LOCK), \
        "environment.yml is stale: run `python -m kimina_edu.environment env` (make lock does)"


def test_makefile_installs_from_the_locks():
    makefile = (REPO / "Makefile").read_text()
    assert "-r requirements.lock" in makefile and "-r kimina_edu/verl/requirements-verl.lock" in makefile
    assert 'install -q -e ".[test]"' not in makefile, "an unpinned install would bypass the lock"


def test_mismatches_are_one_line_each(tmp_path, monkeypatch):
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy==0.0.1\n    # via x\nno-such-package-kimina==1.0\nuvloop==9.9 ; sys_platform == 'nope'\n")
    lines = environment.lock_mismatches(lock)
    assert len(lines) == 2
    assert lines[0].startswith("no-such-package-kimina: locked 1.0, not installed")
    assert lines[1].startswith("numpy: locked 0.0.1, installed ")
    assert all("\n" not in line for line in lines)


def test_a_range_in_the_lock_is_refused(tmp_path):
    lock = tmp_path / "requirements.lock"
    lock.write_text("numpy>=2\n")
    with pytest.raises(ValueError, match="make lock"):
        read_lock(lock)
    with pytest.raises(FileNotFoundError, match="make lock"):
        read_lock(tmp_path / "missing.lock")


def test_the_installed_environment_matches_the_lock():
    """`make install` installs exactly the lock; a drifted environment is reported, not ignored."""
    assert environment.lock_mismatches() == []
