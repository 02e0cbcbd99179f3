"""One import root: everything installs and imports as ``kafkasim.*``.

Protects the users of issue "one package": a student's own ``producer.py`` next to a lab
script must not shadow kafkasim's modules; the installed distribution adds ``kafkasim``
alone to site-packages; the public API at the root is lazy; and the layer contract in
pyproject.toml is enforced (and would catch an upward import).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# What a student's lab folder plausibly holds: files named like kafkasim's parts.
STUDENT_FILES = ("producer.py", "consumer.py", "broker.py", "storage.py", "coordinator.py", "scenarios.py")


def _student_folder(tmp_path):
    lab = tmp_path / "lab"
    lab.mkdir()
    for name in STUDENT_FILES:
        # importing any of these would fail loudly, as the student's half-written file did
        (lab / name).write_text(f"raise ImportError('the student file {name} was imported')\n")
    return lab


def test_a_students_files_do_not_shadow_kafkasim_in_a_script(tmp_path):
    lab = _student_folder(tmp_path)
    (lab / "lab.py").write_text(textwrap.dedent("""
        from kafkasim import Broker, Consumer, MockClock, Producer, TopicPartition

        clock = MockClock(0)
        broker = Broker("data", clock=clock)
        broker.create_topic("events", partitions=3)
        producer = Producer(broker, clock=clock)
        for i in range(30):
            producer.send("events", key=b"k%d" % (i % 5), value=b"v%d" % i)
        producer.flush()
        consumer = Consumer(broker, "events", clock=clock, group_id="g", auto_offset_reset="earliest")
        got = []
        for _ in range(30):
            got += [r for rs in consumer.poll(timeout_ms=100).values() for r in rs]
            clock.sleep(1000)   # simulated time: the group's initial rebalance delay passes
            if len(got) >= 30:
                break
        consumer.close()
        broker.close()
        print(len(got), sorted({r.partition for r in got}))
    """))
    out = subprocess.run([sys.executable, "lab.py"], cwd=lab, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "30"


def test_a_students_files_do_not_shadow_kafkasim_in_a_scenario(tmp_path):
    lab = _student_folder(tmp_path)
    out = subprocess.run([sys.executable, "-m", "kafkasim.scenarios.hot_keys", "--json", "--seed", "3",
                          "--data-dir", "data", "--param", "records=2000"],
                         cwd=lab, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["records"] == 2000 and result["hottest"][0]["key"] == "merchant-0001"


def test_importing_the_vocabulary_or_the_root_imports_nothing_heavy():
    """``import kafkasim.errors`` and ``import kafkasim`` stay cheap: no broker, storage,
    numpy or pyspark until a name from the public API is used."""
    script = textwrap.dedent("""
        import sys
        import kafkasim, kafkasim.errors, kafkasim.clock, kafkasim.types, kafkasim.config
        import kafkasim.storage, kafkasim.producer, kafkasim.consumer, kafkasim.broker, kafkasim.coordinator
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("numpy", "pyspark", "msgpack", "pyarrow")
                       or m in ("kafkasim.broker.broker", "kafkasim.storage.log", "kafkasim.producer.producer",
                                "kafkasim.consumer.consumer", "kafkasim.coordinator.coordinator"))
        print(",".join(heavy))
        from kafkasim import Broker, Consumer, MockClock, Producer, TopicPartition
        print(Broker.__module__, Producer.__module__, Consumer.__module__, TopicPartition.__module__, MockClock.__module__)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == ""
    assert lines[1].split() == ["kafkasim.broker.broker", "kafkasim.producer.producer",
                                "kafkasim.consumer.consumer", "kafkasim.types", "kafkasim.clock"]


def test_the_public_api_names_what_it_exports():
    import kafkasim

    for name in ("Broker", "Producer", "Consumer", "TopicPartition", "MockClock"):
        assert name in kafkasim.__all__ and name in dir(kafkasim)
    with pytest.raises(AttributeError, match="no attribute 'Brokr'"):
        kafkasim.Brokr  # noqa: B018


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_layer_contract_holds_and_bites(tmp_path):
    """``make test`` runs the contracts; an upward import (storage -> broker) breaks them."""
    lint = _load_script("lint_imports")
    clean = lint.stage(str(tmp_path / "clean"))
    result = lint.run(clean)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout

    bad = lint.stage(str(tmp_path / "bad"))
    with open(os.path.join(bad, "kafkasim", "storage", "layout.py"), "a") as f:
        f.write("\nfrom kafkasim.broker import broker as _upward  # noqa\n")
    result = lint.run(bad)
    assert result.returncode != 0
    assert "kafkasim.storage.layout -> kafkasim.broker" in result.stdout


def test_the_spark_contract_bites(tmp_path):
    """A Spark job that reaches into the producer (as spark_jobs/common.py once did) is refused."""
    lint = _load_script("lint_imports")
    bad = lint.stage(str(tmp_path / "bad"))
    with open(os.path.join(bad, "kafkasim", "spark_jobs", "common.py"), "a") as f:
        f.write("\nfrom kafkasim.producer import producer as _heavy  # noqa\n")
    result = lint.run(bad)
    assert result.returncode != 0
    assert "kafkasim.spark_jobs.common -> kafkasim.producer" in result.stdout


def _copy_source(dest):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        if rel.startswith(("tests/", "docs/", "benchmarks/")) or not os.path.isfile(os.path.join(ROOT, rel)):
            continue
        os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
        shutil.copyfile(os.path.join(ROOT, rel), os.path.join(dest, rel))
    return dest


@pytest.mark.slow
def test_pip_install_puts_kafkasim_alone_in_site_packages_and_the_c_codec_is_optional(tmp_path):
    src = _copy_source(str(tmp_path / "src"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    pip = [py, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check"]

    subprocess.run([*pip, src], check=True, capture_output=True, timeout=600)
    # msgpack, numpy, ... are not installed in this venv (--no-deps): only the layout is probed
    probe = textwrap.dedent("""
        import importlib.metadata as md, importlib.util, json
        dist = md.distribution("kafkasim")
        tops = sorted(set(dist.read_text("top_level.txt").split()))
        roots = sorted({str(f).split("/")[0] for f in dist.files
                        if not str(f).startswith("../") and ".dist-info" not in str(f)})
        print(json.dumps({"top_level": tops, "roots": roots,
                          "c": importlib.util.find_spec("kafkasim.records._codec") is not None}))
    """)
    out = subprocess.run([py, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path)
    facts = json.loads(out.stdout)
    assert facts["top_level"] == ["kafkasim"]
    assert facts["roots"] == ["kafkasim"]
    assert facts["c"] is True

    # No C compiler: the install still succeeds and says, in one line, that the pure-Python codec is used.
    src = _copy_source(str(tmp_path / "src2"))    # fresh tree: no build/ left by the first install
    env = dict(os.environ, CC="/bin/false", LDSHARED="/bin/false")
    built = subprocess.run([py, "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-cache-dir", "-v", src],
                           env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    assert "the pure-Python record codec will be used" in built.stdout + built.stderr
    out = subprocess.run([py, "-c", "import importlib.util as u; print(u.find_spec('kafkasim.records._codec'))"],
                         capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "None"


def test_every_package_folder_is_listed_for_the_wheel():
    """A package missing from pyproject's explicit list would work in the editable install
    and vanish from a real one; every folder with an __init__.py must be listed."""
    import tomllib
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        tool = tomllib.load(f)["tool"]["setuptools"]
    listed, dirs = set(tool["packages"]), tool["package-dir"]
    found = set()
    for package, folder in dirs.items():
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            if "__init__.py" in files and "__pycache__" not in dirpath:
                rel = os.path.relpath(dirpath, os.path.join(ROOT, folder))
                found.add(package if rel == "." else package + "." + rel.replace(os.sep, "."))
    assert found == listed
