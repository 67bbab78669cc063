"""The C++ compiler driver and disk code cache (src/runtime/cpp_compiler.h) through ember._C.codecache.

Every test uses its own tmp_path cache dir, its own compile context (the `code_cache` fixture: empty
memos of compiler versions, header digests and precompiled headers) and a source text no other test
uses: the memo of loaded libraries is process-wide and keyed by the cache key alone, so a shared source
would be a memo hit that never touches the disk. Disk behaviour (hits, corruption) is checked in fresh
child processes, which have an empty memo.
"""
import gc
import hashlib
import os
import random
import shutil
import stat
import subprocess
import sys
import textwrap
import threading

import pytest

from ember._C import codecache

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "python")
CXX = shutil.which("g++")
needs_gxx = pytest.mark.skipif(CXX is None, reason="no g++ on PATH")


def kernel(tag, body="return x * 3 + 1;"):
    return f'#include <cstdint>\n// {tag}\nextern "C" int64_t f(int64_t x) {{ {body} }}\n'


def include_dir(tmp_path, text="inline int ember_helper() { return 7; }\n"):
    d = tmp_path / "include" / "ember"
    d.mkdir(parents=True, exist_ok=True)
    (d / "vec.h").write_text(text)
    return str(tmp_path / "include")


@pytest.fixture
def code_cache():
    """A compile context of the test's own."""
    return codecache.CodeCache()


def options(tmp_path, **kw):
    o = dict(compiler=CXX, include_dirs=[include_dir(tmp_path)], cache_dir=str(tmp_path / "cache"), isa="scalar")
    o.update(kw)
    return o


CHILD_PRELUDE = "import sys\nfrom ember._C import codecache\ncode_cache = codecache.CodeCache()\n"


def run_child(script, *args):
    """Runs `script` in a fresh interpreter (empty memo); returns its stdout's last line, eval()ed."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    code = CHILD_PRELUDE + textwrap.dedent(script)
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return eval(done.stdout.strip().splitlines()[-1])


CHILD_COMPILE = """
import ast
source, opts = sys.argv[1], ast.literal_eval(sys.argv[2])
library, hit, seconds = code_cache.compile_and_load(source, **opts)
print(repr((library.path, hit, library.call_i64("f", 5))))
"""


def compile_in_child(source, opts):
    return run_child(CHILD_COMPILE, source, repr(opts))


def counting_compiler(tmp_path, name="cxx-wrapper", version=None):
    """A $CXX that logs every compile (not --version) to <name>.log, then runs g++."""
    log = tmp_path / f"{name}.log"
    script = tmp_path / name
    version_line = f'if [ "$1" = --version ]; then echo "{version}"; exit 0; fi\n' if version else ""
    script.write_text(
        "#!/bin/sh\n" + version_line +
        f'if [ "$1" != --version ]; then echo compile >> "{log}"; fi\nexec "{CXX}" "$@"\n')
    script.chmod(0o755)
    return str(script), log


def compile_count(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


# ---- sha256 ----

# portable=False uses the x86 SHA instructions where the CPU has them; both paths must agree.
@pytest.mark.parametrize("portable", [False, True])
def test_sha256_nist_vectors(portable):
    assert codecache.sha256(b"", portable) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert codecache.sha256(b"abc", portable) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert codecache.sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", portable) == (
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    assert codecache.sha256(b"a" * 1_000_000, portable) == (
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")


@pytest.mark.parametrize("portable", [False, True])
def test_sha256_agrees_with_hashlib_across_block_boundaries(portable):
    rng = random.Random(1234)
    for n in list(range(0, 130)) + [1000, 4096, 65537]:
        data = bytes(rng.randrange(256) for _ in range(n))
        assert codecache.sha256(data, portable) == hashlib.sha256(data).hexdigest(), n


# ---- ISA and flags ----

def cpuinfo_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return None


def test_detect_isa_matches_proc_cpuinfo():
    flags = cpuinfo_flags()
    if flags is None:
        pytest.skip("/proc/cpuinfo has no flags line (not x86 Linux)")
    avx2 = {"avx", "avx2", "fma", "f16c"} <= flags
    avx512 = avx2 and {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags
    expected = "avx512" if avx512 else "avx2" if avx2 else "scalar"
    assert codecache.detect_isa() == expected


def test_compile_flags_are_spelled_out():
    scalar = codecache.compile_flags(isa="scalar", include_dirs=["/x/include"])
    assert "-ffp-contract=off" in scalar and "-O3" in scalar and "-fopenmp" in scalar
    assert "-I/x/include" in scalar
    assert not any("fast-math" in f or f.startswith("-march") for f in scalar)
    assert not any(f.startswith("-DEMBER_ISA") or f.startswith("-mavx") for f in scalar)
    avx2 = codecache.compile_flags(isa="avx2")
    assert {"-mavx2", "-mfma", "-mf16c", "-DEMBER_ISA_AVX2"} <= set(avx2)
    avx512 = codecache.compile_flags(isa="avx512")
    assert {"-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-DEMBER_ISA_AVX512"} <= set(avx512)
    assert "-fopenmp" not in codecache.compile_flags(openmp=False)
    with pytest.raises(ValueError, match="unknown ISA 'sse'"):
        codecache.compile_flags(isa="sse")


# ---- keys ----

@needs_gxx
def test_cache_key_changes_with_every_input(code_cache, tmp_path):
    o = options(tmp_path)
    base = code_cache.cache_key(kernel("k"), **o)
    assert len(base) == 64 and int(base, 16) >= 0
    assert code_cache.cache_key(kernel("k"), **o) == base
    assert code_cache.cache_key(kernel("k2"), **o) != base
    assert code_cache.cache_key(kernel("k"), **dict(o, isa="avx2")) != base
    assert code_cache.cache_key(kernel("k"), **dict(o, openmp=False)) != base
    # The cache dir is where entries live, not what they are.
    assert code_cache.cache_key(kernel("k"), **dict(o, cache_dir=str(tmp_path / "other"))) == base
    header = tmp_path / "include" / "ember" / "vec.h"
    header.write_text(header.read_text() + "// changed\n")
    assert code_cache.cache_key(kernel("k"), **o) != base
    other_version, _ = counting_compiler(tmp_path, "cxx-other", version="g++ (Other) 99.0")
    assert code_cache.compiler_version(other_version) == "g++ (Other) 99.0"
    assert code_cache.cache_key(kernel("k"), **dict(o, compiler=other_version)) != base


def test_cache_key_names_a_missing_include_dir(code_cache, tmp_path):
    if CXX is None:
        pytest.skip("no g++ on PATH")
    with pytest.raises(codecache.CacheError, match="include directory .*nowhere"):
        code_cache.cache_key(kernel("k"), **options(tmp_path, include_dirs=[str(tmp_path / "nowhere")]))


# ---- compile, load, hit ----

@needs_gxx
def test_compile_load_call_then_memo_hit(code_cache, tmp_path):
    o = options(tmp_path)
    source = kernel(f"memo {tmp_path}", "return x * 3 + ember_helper();").replace(
        "#include <cstdint>", "#include <cstdint>\n#include \"ember/vec.h\"")
    library, hit, seconds = code_cache.compile_and_load(source, **o)
    path, key = library.path, library.key
    assert not hit and seconds > 0
    assert key == code_cache.cache_key(source, **o)
    assert path == os.path.join(o["cache_dir"], "cpp", key[:2], key + ".so")
    entry = os.path.dirname(path)
    assert sorted(os.listdir(entry)) == sorted(f"{key}{ext}" for ext in (".so", ".sha256", ".cpp", ".lock"))
    assert open(os.path.join(entry, key + ".cpp")).read() == source
    assert library.call_i64("f", 5) == 22
    with pytest.raises(RuntimeError, match="symbol 'g' is not defined"):
        library.call_i64("g", 5)
    # Memo: same library while it is held, the disk is not consulted (even with the entry gone).
    shutil.rmtree(entry)
    again, hit, _ = code_cache.compile_and_load(source, **o)
    assert (again.path, hit) == (path, True) and again.call_i64("f", 1) == 10


def mapped(path):
    with open("/proc/self/maps") as maps:
        return any(line.rstrip().endswith(path) for line in maps)


@needs_gxx
def test_a_library_is_unloaded_when_the_last_reference_goes(code_cache, tmp_path):
    # A long process compiling and dropping graphs must not keep every library mapped (about 13,000 used
    # up the 65,530 memory maps a process may have).
    o = options(tmp_path)
    source = kernel(f"unload {tmp_path}")
    before = codecache.loaded_library_count()
    library, hit, _ = code_cache.compile_and_load(source, **o)
    path, key = library.path, library.key
    assert not hit and codecache.is_loaded(key) and mapped(path)
    assert codecache.loaded_library_count() == before + 1
    same, hit, _ = code_cache.compile_and_load(source, **o)
    assert hit and same.path == path
    del library, same
    gc.collect()
    assert not codecache.is_loaded(key) and not mapped(path)
    assert codecache.loaded_library_count() == before
    # Loaded again from the disk entry, not compiled again.
    library, hit, _ = code_cache.compile_and_load(source, **o)
    assert hit and library.call_i64("f", 5) == 16 and mapped(path)


@needs_gxx
def test_temporaries_of_exited_processes_are_swept(code_cache, tmp_path):
    # A process that exits while its compiler writes (a precompiled header built in the background) leaves
    # `<entry>.tmp.<pid>.<n>`; the next build of that entry removes those whose process is gone.
    o = options(tmp_path)
    source = kernel(f"sweep {tmp_path}")
    key = code_cache.cache_key(source, **o)
    so = os.path.join(o["cache_dir"], "cpp", key[:2], key + ".so")
    os.makedirs(os.path.dirname(so), mode=0o700, exist_ok=True)
    os.chmod(o["cache_dir"], 0o700)
    os.chmod(os.path.dirname(os.path.dirname(so)), 0o700)
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                            text=True).stdout.strip()
    stale, live = f"{so}.tmp.{exited}.0", f"{so}.tmp.{os.getpid()}.999"
    for path in (stale, live):
        open(path, "w").write("half a library")
    library, hit, _ = code_cache.compile_and_load(source, **o)
    assert not hit and library.call_i64("f", 5) == 16
    assert not os.path.exists(stale) and os.path.exists(live)


@needs_gxx
def test_fresh_process_is_a_disk_hit(tmp_path):
    cxx, log = counting_compiler(tmp_path)
    o = options(tmp_path, compiler=cxx)
    source = kernel(f"disk {tmp_path}")
    path, hit, value = compile_in_child(source, o)
    assert (hit, value) == (False, 16)
    assert compile_in_child(source, o) == (path, True, 16)
    assert compile_count(log) == 1


def entry_files(code_cache, opts, source):
    key = code_cache.cache_key(source, **opts)
    stem = os.path.join(opts["cache_dir"], "cpp", key[:2], key)
    return stem + ".so", stem + ".sha256"


@needs_gxx
@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "no_digest", "garbage_with_matching_digest"])
def test_damaged_entry_is_rebuilt(code_cache, tmp_path, damage):
    cxx, log = counting_compiler(tmp_path)
    o = options(tmp_path, compiler=cxx)
    source = kernel(f"damage {damage} {tmp_path}")
    assert compile_in_child(source, o)[1:] == (False, 16)
    so, digest = entry_files(code_cache, o, source)
    data = open(so, "rb").read()
    if damage == "truncate":
        open(so, "wb").write(data[: len(data) // 2])
    elif damage == "flip_byte":
        i = len(data) // 3
        open(so, "wb").write(data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1:])
    elif damage == "no_digest":
        os.unlink(digest)
    else:  # the digest matches, but dlopen refuses the file: rebuilt once
        junk = b"not an ELF file" * 100
        open(so, "wb").write(junk)
        open(digest, "w").write(hashlib.sha256(junk).hexdigest())
    assert compile_in_child(source, o)[1:] == (False, 16)
    assert compile_count(log) == 2
    assert compile_in_child(source, o)[1:] == (True, 16)
    assert hashlib.sha256(open(so, "rb").read()).hexdigest() == open(digest).read()


# ---- the cache directory ----

@needs_gxx
def test_cache_dir_created_0700_with_parents(code_cache, tmp_path):
    cache = tmp_path / "a" / "b" / "ember"
    code_cache.compile_and_load(kernel(f"mode {tmp_path}"), **options(tmp_path, cache_dir=str(cache)))
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(cache / "cpp").st_mode) == 0o700
    assert (tmp_path / "a" / "b").is_dir()


@needs_gxx
def test_cache_dir_writable_by_others_is_refused(code_cache, tmp_path):
    cache = tmp_path / "shared"
    cache.mkdir()
    cache.chmod(0o777)
    with pytest.raises(codecache.CacheError, match=r"shared' is writable by group or others \(mode 0777\).*chmod 700"):
        code_cache.compile_and_load(kernel(f"perm {tmp_path}"), **options(tmp_path, cache_dir=str(cache)))
    cache.chmod(0o770)
    with pytest.raises(codecache.CacheError, match="writable by group or others"):
        code_cache.compile_and_load(kernel(f"perm {tmp_path}"), **options(tmp_path, cache_dir=str(cache)))
    assert os.listdir(cache) == []


def test_cache_dir_owned_by_another_user_is_refused(code_cache, tmp_path):
    cache = tmp_path / "theirs"
    cache.mkdir(mode=0o700)
    # The check with another uid, on any machine.
    with pytest.raises(codecache.CacheError, match=rf"theirs' is owned by uid {os.geteuid()}, not by this user "
                                                   rf"\(uid {os.geteuid() + 1}\).*EMBER_CACHE_DIR"):
        codecache.ensure_cache_dir(str(cache), os.geteuid() + 1)
    codecache.ensure_cache_dir(str(cache), os.geteuid())
    if os.geteuid() != 0:
        return  # only root can hand a directory to another user for the real thing
    os.chown(cache, 12345, 12345)
    with pytest.raises(codecache.CacheError, match="owned by uid 12345"):
        code_cache.compile_and_load(kernel(f"owner {tmp_path}"), **options(tmp_path, cache_dir=str(cache)))


def test_symlink_to_unsafe_dir_is_refused_and_to_safe_dir_accepted(tmp_path):
    unsafe = tmp_path / "unsafe"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    link = tmp_path / "link"
    link.symlink_to(unsafe)
    with pytest.raises(codecache.CacheError, match=r"link' \(a symlink\) is writable by group or others"):
        codecache.ensure_cache_dir(str(link), os.geteuid())
    unsafe.chmod(0o700)
    codecache.ensure_cache_dir(str(link), os.geteuid())


def test_cache_dir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(codecache.CacheError, match="file' is not a directory"):
        codecache.ensure_cache_dir(str(f), os.geteuid())


# ---- concurrency ----

CHILD_RACE = """
import ast, os, time
source, opts, go = sys.argv[1], ast.literal_eval(sys.argv[2]), sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.001)
library, hit, seconds = code_cache.compile_and_load(source, **opts)
print(repr((library.path, hit, library.call_i64("f", 5))))
"""


@needs_gxx
def test_two_processes_compile_the_same_source_once(tmp_path):
    cxx, log = counting_compiler(tmp_path)
    o = options(tmp_path, compiler=cxx)
    source = kernel(f"race {tmp_path}")
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    code = CHILD_PRELUDE + textwrap.dedent(CHILD_RACE)
    children = [subprocess.Popen([sys.executable, "-c", code, source, repr(o), str(go)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    go.write_text("")
    results = []
    for child in children:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        results.append(eval(out.strip().splitlines()[-1]))
    assert compile_count(log) == 1
    assert sorted(hit for _, hit, _ in results) == [False, True]
    assert {(path, value) for path, _, value in results} == {(results[0][0], 16)}


@needs_gxx
def test_threads_compile_the_same_source_once(code_cache, tmp_path):
    cxx, log = counting_compiler(tmp_path)
    o = options(tmp_path, compiler=cxx)
    source = kernel(f"threads {tmp_path}")
    results, errors = [], []

    def work():
        try:
            results.append(code_cache.compile_and_load(source, **o))
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert compile_count(log) == 1
    assert len({r[0] for r in results}) == 1
    assert sorted(r[1] for r in results) == [False, True, True, True]


# ---- errors ----

@needs_gxx
def test_compile_error_carries_the_compiler_message(code_cache, tmp_path):
    o = options(tmp_path)
    source = kernel(f"broken {tmp_path}", "return x +* ;")
    with pytest.raises(codecache.CompileError) as info:
        code_cache.compile_and_load(source, **o)
    e = info.value
    assert "expected primary-expression" in e.compiler_output
    assert "expected primary-expression" in str(e)
    assert e.command_line.startswith(CXX) and "-ffp-contract=off" in e.command_line
    assert e.source_path.endswith(".failed.cpp") and open(e.source_path).read() == source
    assert e.source_path in str(e)
    key = code_cache.cache_key(source, **o)
    entry = os.path.join(o["cache_dir"], "cpp", key[:2])
    assert not any(name.endswith(".so") or ".tmp." in name for name in os.listdir(entry))


@needs_gxx
def test_unloadable_library_is_a_compile_error(code_cache, tmp_path):
    # Links (-shared allows undefined symbols) but RTLD_NOW refuses it.
    source = f'// {tmp_path}\nextern "C" long missing_fn(long);\nextern "C" long f(long x) {{ return missing_fn(x); }}\n'
    with pytest.raises(codecache.CompileError, match="does not load.*missing_fn"):
        code_cache.compile_and_load(source, **options(tmp_path))


def test_missing_compiler_is_a_compile_error(code_cache, tmp_path):
    with pytest.raises(codecache.CompileError, match="cannot run the C\\+\\+ compiler '/no/such/cxx'"):
        code_cache.compile_and_load(kernel("x"), **options(tmp_path, compiler="/no/such/cxx"))


# ---- precompiled header ----

PCH_HEADER = "#pragma once\n#include <cstdint>\n#include <cmath>\ninline int64_t ember_scale(int64_t x) { return 3 * x; }\n"


def pch_source(tag):
    return f'#include "ember/vec.h"\n// {tag}\nextern "C" int64_t f(int64_t x) {{ return ember_scale(x) + 1; }}\n'


def pch_reporting_compiler(tmp_path):
    """A $CXX that runs g++ -H and logs the headers it reads: a used PCH shows as a line '! <path>.gch'."""
    log = tmp_path / "headers.log"
    script = tmp_path / "cxx-H"
    script.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then exec "{CXX}" "$@"; fi\n'
                      f'echo "run $*" >> "{log}"\nexec "{CXX}" -H "$@" 2>> "{log}"\n')
    script.chmod(0o755)
    return str(script), log


@needs_gxx
def test_precompiled_header_is_built_once_keyed_and_used(code_cache, tmp_path):
    cxx, log = pch_reporting_compiler(tmp_path)
    o = options(tmp_path, compiler=cxx, precompiled_header="ember/vec.h")
    (tmp_path / "include" / "ember" / "vec.h").write_text(PCH_HEADER)
    assert code_cache.cache_key(pch_source("a"), **o) != code_cache.cache_key(
        pch_source("a"), **dict(o, precompiled_header=""))
    assert compile_in_child(pch_source(f"pch a {tmp_path}"), o)[1:] == (False, 16)
    assert compile_in_child(pch_source(f"pch b {tmp_path}"), o)[1:] == (False, 16)
    runs = [line for line in log.read_text().splitlines() if line.startswith("run ")]
    assert len(runs) == 3 and "c++-header" in runs[0]  # one PCH build, two kernels
    pch_root = os.path.join(o["cache_dir"], "pch")
    (key_dir,) = [d for d in os.listdir(pch_root) if os.path.isdir(os.path.join(pch_root, d))]
    gch = os.path.join(pch_root, key_dir, "ember", "vec.h.gch")
    assert hashlib.sha256(open(gch, "rb").read()).hexdigest() == open(os.path.join(pch_root, key_dir + ".sha256")).read()
    assert log.read_text().count(f"! {gch}") == 2
    assert stat.S_IMODE(os.stat(os.path.join(pch_root, key_dir)).st_mode) == 0o700

    # A damaged PCH is rebuilt by the next process that needs it.
    data = open(gch, "rb").read()
    open(gch, "wb").write(data[: len(data) // 2])
    assert compile_in_child(pch_source(f"pch c {tmp_path}"), o)[1:] == (False, 16)
    runs = [line for line in log.read_text().splitlines() if line.startswith("run ")]
    assert len(runs) == 5 and "c++-header" in runs[3]
    assert log.read_text().count(f"! {gch}") == 3

    # A changed header is a new PCH (and new kernel keys).
    (tmp_path / "include" / "ember" / "vec.h").write_text(PCH_HEADER.replace("3 * x", "4 * x"))
    assert compile_in_child(pch_source(f"pch a {tmp_path}"), o)[1:] == (False, 21)
    assert len([d for d in os.listdir(pch_root) if os.path.isdir(os.path.join(pch_root, d))]) == 2


@needs_gxx
def test_precompiled_header_missing_is_a_cache_error(code_cache, tmp_path):
    o = options(tmp_path, precompiled_header="ember/nothere.h")
    with pytest.raises(codecache.CacheError, match="precompiled header 'ember/nothere.h' is not in any include"):
        code_cache.compile_and_load(pch_source(f"nothere {tmp_path}"), **o)


# ---- compile contexts ----

def versioned_compiler(tmp_path):
    """A $CXX whose `--version` prints the file it returns (so a test can change it), else runs g++."""
    version = tmp_path / "version"
    script = tmp_path / "cxx-versioned"
    script.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then cat "{version}"; exit 0; fi\nexec "{CXX}" "$@"\n')
    script.chmod(0o755)
    return str(script), version


def test_contexts_do_not_share_memos(tmp_path):
    cxx, version = versioned_compiler(tmp_path)
    version.write_text("g++ (One) 1.0\n")
    o = options(tmp_path, compiler=cxx)
    first = codecache.CodeCache()
    assert first.compiler_version(cxx) == "g++ (One) 1.0"
    key_one = first.cache_key(kernel("ctx"), **o)
    version.write_text("g++ (Two) 2.0\n")
    # A context keeps what it read (the documented cost of not running --version per compile)...
    assert first.compiler_version(cxx) == "g++ (One) 1.0"
    assert first.cache_key(kernel("ctx"), **o) == key_one
    # ...and a fresh one reads it again: nothing of the first leaks into it, nor back.
    second = codecache.CodeCache()
    assert second.compiler_version(cxx) == "g++ (Two) 2.0"
    assert second.cache_key(kernel("ctx"), **o) != key_one
    assert first.compiler_version(cxx) == "g++ (One) 1.0"


def pch_builds(log):
    return [line for line in log.read_text().splitlines() if line.startswith("run ") and "c++-header" in line]


@needs_gxx
def test_each_context_verifies_the_precompiled_header_itself(tmp_path):
    cxx, log = pch_reporting_compiler(tmp_path)
    o = options(tmp_path, compiler=cxx, precompiled_header="ember/vec.h")
    (tmp_path / "include" / "ember" / "vec.h").write_text(PCH_HEADER)
    first = codecache.CodeCache()
    assert first.compile_and_load(pch_source(f"ctx a {tmp_path}"), **o)[1] is False
    assert len(pch_builds(log)) == 1
    shutil.rmtree(os.path.join(o["cache_dir"], "pch"))
    # The first context verified the PCH already and does not look again (GCC skips the missing
    # -I directory and reads the header itself); a fresh context checks the disk and rebuilds it.
    first.compile_and_load(pch_source(f"ctx b {tmp_path}"), **o)
    assert len(pch_builds(log)) == 1
    second = codecache.CodeCache()
    second.compile_and_load(pch_source(f"ctx c {tmp_path}"), **o)
    assert len(pch_builds(log)) == 2
    used = [line for line in log.read_text().splitlines() if line.startswith("! ") and line.endswith("vec.h.gch")]
    assert len(used) == 2  # kernels a and c used the PCH, b did not


CHILD_BACKGROUND_PCH = """
import ast, gc, glob, os, time
source, opts = sys.argv[1], ast.literal_eval(sys.argv[2])
library, hit, seconds = code_cache.compile_and_load(source, precompiled_header_in_background=True, **opts)
del code_cache  # the PCH build started by this compile goes on without its context
gc.collect()
pattern = os.path.join(opts["cache_dir"], "pch", "*", "ember", "vec.h.gch")
deadline = time.time() + 100
while not glob.glob(pattern) and time.time() < deadline:
    time.sleep(0.05)
print(repr((hit, library.call_i64("f", 5), len(glob.glob(pattern)))))
"""


@needs_gxx
def test_background_precompiled_header_outlives_its_context(tmp_path):
    cxx, log = pch_reporting_compiler(tmp_path)
    o = options(tmp_path, compiler=cxx, precompiled_header="ember/vec.h")
    (tmp_path / "include" / "ember" / "vec.h").write_text(PCH_HEADER)
    # The compile does not wait for the PCH; the build finishes after the context is gone.
    assert run_child(CHILD_BACKGROUND_PCH, pch_source(f"bg a {tmp_path}"), repr(o)) == (False, 16, 1)
    assert len(pch_builds(log)) == 1
    pch_root = os.path.join(o["cache_dir"], "pch")
    (key_dir,) = [d for d in os.listdir(pch_root) if os.path.isdir(os.path.join(pch_root, d))]
    gch = os.path.join(pch_root, key_dir, "ember", "vec.h.gch")
    assert hashlib.sha256(open(gch, "rb").read()).hexdigest() == open(os.path.join(pch_root, key_dir + ".sha256")).read()
    # What it published is a valid PCH that the next compile uses.
    assert compile_in_child(pch_source(f"bg b {tmp_path}"), o)[1:] == (False, 16)
    assert len(pch_builds(log)) == 1 and log.read_text().count(f"! {gch}") == 1
