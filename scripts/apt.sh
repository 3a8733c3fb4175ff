# Debian packages for the tests' system parts, pinned by their upstream version, not by a Debian
# revision: a security update replaces a revision in the archive (the old one can no longer be
# installed), never the upstream version of a stable release. Sourced by scripts/cluster,
# scripts/observe and scripts/console; expects a `say` and a `die` function.

# deb_version PACKAGE: the installed version (5:7.0.15-1~deb12u7), or nothing.
deb_version() {
  { dpkg-query -W -f '${db:Status-Status} ${Version}' "$1" 2>/dev/null || true; } |
    sed -n 's/^installed //p'
}

# upstream VERSION: the upstream part of a Debian version, without epoch, revision or repack
# suffix (5:7.0.15-1~deb12u7 -> 7.0.15, 2.42.0+ds-5+b6 -> 2.42.0).
upstream() {
  local v=${1#*:}
  v=${v%-*}
  v=${v%%+*}
  v=${v%%~*}
  printf '%s' "$v"
}

# version_ok UPSTREAM WANTED: WANTED is `7.0` (that minor version), `2.x` (that major version)
# or `>=148` (that major version or later).
version_ok() {
  local have=$1 wanted=$2 major=${1%%.*}
  case $wanted in
    '>='*) [[ $major =~ ^[0-9]+$ ]] && [ "$major" -ge "${wanted#>=}" ] ;;
    *.x) [ "$major" = "${wanted%.x}" ] ;;
    *) [[ $have == "$wanted".* || $have == "$wanted" ]] ;;
  esac
}

# apt_get ARGS...: apt-get, as root or with sudo, without questions.
apt_get() {
  local sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@"
}

# apt_install_upstream "PACKAGE=WANTED"...: installs each package that is missing (Debian's
# current revision, whatever it is), then checks every one for its wanted upstream version and
# prints the version used. A package already installed at a wanted version is left as it is.
# Stale package lists (a revision the archive no longer has) are refreshed once, then retried.
apt_install_upstream() {
  local spec package wanted missing=() version
  for spec in "$@"; do
    package=${spec%%=*} wanted=${spec#*=}
    version=$(deb_version "$package")
    if [ -z "$version" ] || ! version_ok "$(upstream "$version")" "$wanted"; then
      missing+=("$package")
    fi
  done
  if [ ${#missing[@]} -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 ||
      die "no apt-get here: install ${missing[*]} with this system's package manager"
    say "installing ${missing[*]} (Debian's current revision)"
    apt_get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
      { apt_get update -q >/dev/null 2>&1 &&
        apt_get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; } ||
      die "could not install them: apt-get install ${missing[*]}"
  fi
  for spec in "$@"; do
    package=${spec%%=*} wanted=${spec#*=}
    version=$(deb_version "$package")
    [ -n "$version" ] || die "$package is not installed"
    version_ok "$(upstream "$version")" "$wanted" ||
      die "$package $version is not the upstream version the tests were checked with ($wanted)"
    say "$package $version (upstream $(upstream "$version"), wanted $wanted)"
  done
}
