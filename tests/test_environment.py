"""experiment.environment: what a stored number's environment records, and how two environments are compared."""

import platform

import pytest

from noisy_jax.experiment import environment

_FLAGS = "fpu vme sse sse2 ssse3 sse4_1 sse4_2 popcnt aes xsave avx f16c fma bmi1 avx2 bmi2"


@pytest.mark.parametrize(
  "flags, isa",
  [
    (_FLAGS + " avx512f avx512dq avx512bw", "AVX-512"),
    (_FLAGS, "AVX2"),
    ("sse4_2 avx", "AVX"),
    ("sse2 sse4_1 sse4_2", "SSE4.2"),
  ],
)
def test_vector_isa_reads_the_widest_flag(tmp_path, flags, isa):
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text(f"processor\t: 0\nmodel name\t: Some CPU\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
  assert environment.vector_isa(str(cpuinfo)) == isa


def test_vector_isa_elsewhere_is_the_machine_name(tmp_path):
  cpuinfo = tmp_path / "cpuinfo"
  cpuinfo.write_text("processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n")
  assert environment.vector_isa(str(cpuinfo)) == (platform.machine() or "unknown")
  assert environment.vector_isa(str(tmp_path / "missing")) == (platform.machine() or "unknown")


def test_describe_records_the_isa_and_differences_name_it():
  env = environment.describe()
  assert env["isa"] == environment.vector_isa()
  other = {**env, "isa": "AVX-512" if env["isa"] != "AVX-512" else "AVX2"}
  assert environment.differences(env, other) == [f"isa: {env['isa']} -> {other['isa']}"]
  assert f", {env['isa']})" in environment.summary_line(env)
