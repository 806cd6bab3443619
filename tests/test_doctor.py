"""`circuitdev doctor`: the torch-build classification on fake torch modules (CPU, CUDA with and without a GPU, ROCm,
MPS), the package and Python checks on made-up inputs, run_checks / exit codes, and the command on this machine."""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path
from types import SimpleNamespace

import pytest

from circuitdev import doctor
from circuitdev.commands import doctor as doctor_command


def fake_torch(version="2.13.0+cpu", cuda=None, hip=None, gpus=(), mps=False):
    return SimpleNamespace(
        __version__=version,
        version=SimpleNamespace(cuda=cuda, hip=hip),
        cuda=SimpleNamespace(is_available=lambda: bool(gpus), device_count=lambda: len(gpus),
                             get_device_name=lambda i: gpus[i]),
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: mps)),
    )


def test_cpu_build():
    build = doctor.torch_build(fake_torch())
    assert (build.kind, build.gpu_build, build.cuda_available, build.mps_available) == ("CPU", False, False, False)
    result = doctor.torch_result(build)
    assert result.status == "ok" and "2.13.0+cpu" in result.message and "CPU build" in result.message


def test_cuda_build_without_a_gpu_warns_with_the_size_and_the_fix():
    build = doctor.torch_build(fake_torch("2.13.0+cu128", cuda="12.8"))
    assert build.kind == "CUDA 12.8" and build.gpu_build and not build.cuda_available
    result = doctor.torch_result(build, gpu_bytes=int(2.9e9))
    assert result.status == "warn"
    assert "CUDA 12.8 build" in result.message and "without a GPU" in result.message
    assert "2.9 GB of NVIDIA libraries" in result.message and "~200 MB" in result.message
    assert "make venv TORCH_INDEX=cpu" in result.fix and "rm -rf .venv" in result.fix


def test_cuda_build_with_a_gpu_names_it():
    build = doctor.torch_build(fake_torch("2.13.0+cu128", cuda="12.8", gpus=("NVIDIA H200",)))
    result = doctor.torch_result(build)
    assert result.status == "ok" and "CUDA 12.8 build" in result.message and "1 GPU(s): NVIDIA H200" in result.message


def test_rocm_build_without_a_gpu_warns():
    build = doctor.torch_build(fake_torch("2.13.0+rocm6.4", hip="6.4"))
    assert build.kind == "ROCm 6.4"
    assert doctor.torch_result(build).status == "warn"


def test_mps():
    build = doctor.torch_build(fake_torch("2.13.0", mps=True))
    result = doctor.torch_result(build)
    assert build.kind == "CPU" and build.mps_available
    assert result.status == "ok" and "MPS" in result.message


def test_a_torch_without_an_mps_backend_is_fine():
    torch = fake_torch()
    torch.backends = SimpleNamespace()
    assert doctor.torch_build(torch).mps_available is False


def test_python_version():
    assert doctor.check_python((3, 11, 7), "/x/python").status == "ok"
    old = doctor.check_python((3, 9, 18), "/x/python")
    assert old.status == "fail" and "3.9.18" in old.message and ">= 3.10" in old.message


def _pyproject(tmp_path: Path, deps: list[str]) -> Path:
    path = tmp_path / "pyproject.toml"
    listed = "".join(f'    "{d}",\n' for d in deps)
    path.write_text(f'[project]\nname = "circuitdev"\ndependencies = [\n{listed}]\n\n[project.optional-dependencies]\n'
                    f'dev = ["pytest==9.2.0"]\n')
    return path


def _versions(table):
    def version(name):
        if name not in table:
            raise md.PackageNotFoundError(name)
        return table[name]

    return version


def test_packages_at_their_pins(tmp_path):
    pyproject = _pyproject(tmp_path, ["torch==2.13.0", "pandas==3.1.1", "pyyaml"])
    result = doctor.check_packages(pyproject, _versions({"torch": "2.13.0+cpu", "pandas": "3.1.1", "pyyaml": "6.0"}),
                                   top_levels={})
    assert result.status == "ok"
    assert "3 dependencies" in result.message and "torch 2.13.0+cpu" in result.message and "pyyaml" not in result.message


def test_packages_off_their_pins_warn_and_missing_ones_fail(tmp_path):
    pyproject = _pyproject(tmp_path, ["torch==2.13.0", "pandas==3.1.1", "pyyaml"])
    wrong = doctor.check_packages(pyproject, _versions({"torch": "2.12.1", "pandas": "3.1.1", "pyyaml": "6.0"}),
                                  top_levels={})
    assert wrong.status == "warn" and "torch 2.12.1 (pinned 2.13.0)" in wrong.message and "make venv" in wrong.fix
    missing = doctor.check_packages(pyproject, _versions({"torch": "2.13.0"}), top_levels={})
    assert missing.status == "fail" and "missing: pandas, pyyaml" in missing.message


def test_installed_but_not_importable_fails(tmp_path):
    pyproject = _pyproject(tmp_path, ["pyyaml"])
    result = doctor.check_packages(pyproject, _versions({"pyyaml": "6.0"}),
                                   top_levels={"pyyaml": ["no_such_module_circuitdev_test"]})
    assert result.status == "fail" and "not importable: pyyaml" in result.message


def test_requirement_parsing():
    assert doctor.parse_requirement("torch==2.13.0") == ("torch", "2.13.0")
    assert doctor.parse_requirement("jupyter-book==1.0.4.post1") == ("jupyter-book", "1.0.4.post1")
    assert doctor.parse_requirement("pyyaml") == ("pyyaml", None)
    assert doctor.parse_requirement("numpy>=1.26; python_version<'3.13'") == ("numpy", None)


def test_low_disk_warns(tmp_path):
    assert doctor.check_disk(tmp_path, min_free_gb=0).status == "ok"
    low = doctor.check_disk(tmp_path, min_free_gb=1e12)
    assert low.status == "warn" and "GB free" in low.message


def test_run_checks_turns_a_crash_into_a_fail_and_exit_codes():
    def check_boom():
        raise RuntimeError("no luck")

    def check_fine():
        return doctor.Result("fine", "ok", "fine")

    def check_meh():
        return doctor.Result("meh", "warn", "meh", "do something")

    results = doctor.run_checks([check_fine, check_boom, check_meh])
    assert [r.status for r in results] == ["ok", "fail", "warn"]
    assert results[1].name == "boom" and "RuntimeError: no luck" in results[1].message
    assert doctor.exit_code(results) == 2
    assert doctor.exit_code([results[0], results[2]]) == 0
    with pytest.raises(ValueError):
        doctor.Result("x", "bad", "x")


def test_the_command_on_this_machine(capsys):
    from circuitdev.cli import main

    code = main(["doctor"])
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    for name in ("python", "packages", "torch", "kernel", "disk"):
        assert any(line.split()[1:2] == [name] for line in lines), (name, out)
    torch_line = next(line for line in lines if line.split()[1:2] == ["torch"])
    import torch

    assert torch.__version__ in torch_line
    assert doctor.torch_build(torch).kind in torch_line
    assert lines[-1].startswith("doctor: ")
    assert code == (2 if any(line.startswith("FAIL") for line in lines) else 0)
    assert code == 0, out  # this environment was made by `make venv`: nothing should fail here


def test_the_command_exits_2_when_a_check_fails(monkeypatch, capsys):
    def check_broken():
        return doctor.Result("broken", "fail", "it is broken", "fix it")

    monkeypatch.setattr(doctor_command, "checks_to_run", lambda workshop=False: [*doctor.BASE_CHECKS[:1], check_broken])
    assert doctor_command.run(None) == 2
    out = capsys.readouterr().out
    assert "FAIL  broken" in out and "fix: fix it" in out and "1 failed" in out


def test_the_command_composes_the_check_sets():
    """The library's doctor holds the base checks only; the command adds the workshop's (--workshop)."""
    from circuitdev.workshop import doctor as wdoctor

    assert doctor_command.checks_to_run() == doctor.BASE_CHECKS
    assert doctor_command.checks_to_run(workshop=True) == [*doctor.BASE_CHECKS, *wdoctor.WORKSHOP_CHECKS]
    assert not hasattr(doctor, "default_checks")
