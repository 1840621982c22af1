# Sourced by the bench scripts. need COMMAND PACKAGE: installs the Debian
# package when the command is absent (as root; else the script's own `fail`
# says what to install).
need() {
    command -v "$1" >/dev/null 2>&1 && return 0
    [ "$(id -u)" -eq 0 ] || fail "$1 is missing: apt-get install $2"
    echo "installing $2 (apt-get)" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null ||
        fail "apt-get install $2 failed"
}
