#!/usr/bin/env bash
# register-runner.sh: registers this machine as a GitHub Actions self-hosted runner for
# prgate's workflows (templates/github/amd-pr-test.yml), installs it as a systemd service
# running as a dedicated user, and says what it did. docs/workflow.md explains the setup.
#
# Run it as root on the node, once per runner. It downloads the actions runner from GitHub's
# releases (checked against the checksum GitHub publishes with the release) unless --tarball
# names one already downloaded.
set -euo pipefail

readonly PROG="${0##*/}"

usage() {
    cat <<EOF
Usage: $PROG --url URL --token TOKEN [options]

Registers this machine as a self-hosted GitHub Actions runner for prgate and installs it as a
service (svc.sh install) that runs as a dedicated user. Run as root.

Where to register (required):
  --url URL          https://github.com/OWNER/REPO (a repository's runner) or
                     https://github.com/ORG (an organisation's runner; see --group)  [RUNNER_URL]
  --token TOKEN      the registration token: Settings > Actions > Runners > New runner, or
                       gh api -X POST repos/OWNER/REPO/actions/runners/registration-token --jq .token
                       gh api -X POST orgs/ORG/actions/runners/registration-token --jq .token
                     It expires after an hour. Prefer the environment variable, which keeps it
                     off this command line.                                            [RUNNER_TOKEN]

What the runner is:
  --role ROLE        gpu (default): a GPU node; labels prgate-gpu,<node>
                     orchestrator: the start and finish jobs; label prgate-orchestrator; no
                       container engine, not in the docker group
                     both: one runner with all three labels (a long GPU job then delays other
                       PRs' start jobs: prefer two runners, one per role)            [RUNNER_ROLE]
  --node NAME        the node's name (gpu, both): the \`name\` in the node profile, which is also
                     the runner label the workflow's matrix asks for (default: read from the
                     profile; given, it must agree with the profile)
  --name NAME        the runner's name in GitHub (default: the node's name for gpu and both,
                     <short hostname>-prgate-orchestrator for orchestrator)          [RUNNER_NAME]
  --group GROUP      the organisation's runner group (an organisation URL only; the group
                     must allow the repository)                                     [RUNNER_GROUP]
  --labels LIST      more labels, comma-separated, added to the role's
  --user USER        the service's user (default: prgate-runner for gpu and both,
                     prgate-orchestrator for orchestrator); created when missing
  --dir DIR          where the runner is installed (default: /opt/actions-runner/<name>)
  --work DIR         the runner's work directory, where jobs check out the base branch
                     (default: <dir>/_work)
  --replace          replace a runner of the same name already registered in GitHub

The runner itself:
  --version VERSION  the actions runner release, e.g. 2.321.0 (default: the latest release)
  --tarball FILE     an actions-runner-linux-*.tar.gz already downloaded: nothing is downloaded
  --sha256 HEX       the tarball's expected SHA-256 (default: the one GitHub publishes with the
                     release; with --tarball and no --sha256, the tarball is not checked)

What prgate needs (checked):
  --profile FILE     the node profile (default: /etc/prgate/node.toml)
  --nodes FILE       the GPU nodes, for the orchestrator (default: /etc/prgate/nodes.toml)
  --prgate FILE      the prgate binary (default: /opt/prgate/bin/prgate); its folder goes first
                     on the runner's PATH

  --dry-run          check the prerequisites and print what would be done; change nothing
  -h, --help         this text

Checked before anything changes: Linux on x86_64 or aarch64; git (2.31 or later), jq, curl, tar,
flock, runuser and systemd; prgate runs; for a GPU node: docker or podman, /dev/kfd, the node
profile readable by the runner's user, its checkpoint store there, its work and cache
directories writable by that user (created when missing); for the orchestrator: the nodes file.

Security: a GPU runner's user is put in the docker group, because prgate starts the
containers that PR code runs in. Membership of the docker group is root on this host (a member
can start a container that mounts /). Anything that runs as that user, i.e. every job the
runner takes, is as trusted as root here: that is why the workflow never runs PR code on the
host, only in containers with the isolation of prgate's docs/container.md, and why only a
maintainer can start a run. Give this runner to no other repository or workflow. (With podman
and no docker, the user gets the video and render groups instead, for the GPUs.)
EOF
}

say() { printf '%s: %s\n' "$PROG" "$*"; }
die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 1
}

url="${RUNNER_URL:-}"
token="${RUNNER_TOKEN:-}"
role="${RUNNER_ROLE:-gpu}"
name="${RUNNER_NAME:-}"
group="${RUNNER_GROUP:-}"
node=""
extra_labels=""
user=""
dir=""
work=""
replace=0
version=""
tarball=""
sha256=""
profile="/etc/prgate/node.toml"
nodes_file="/etc/prgate/nodes.toml"
prgate="/opt/prgate/bin/prgate"
dry_run=0

need_value() {
    if [ "$#" -lt 2 ] || [ -z "$2" ]; then
        die "$1 needs a value (see --help)"
    fi
}

while [ "$#" -gt 0 ]; do
    case "$1" in
        -h | --help)
            usage
            exit 0
            ;;
        # The options whose variable is their name without the dashes (only these names reach
        # printf -v: the pattern lists them).
        --url | --token | --role | --node | --name | --group | --user | --dir | --work | \
            --tarball | --profile | --prgate)
            need_value "$@"
            printf -v "${1#--}" '%s' "$2"
            shift 2
            ;;
        --labels) need_value "$@"; extra_labels="$2"; shift 2 ;;
        --nodes) need_value "$@"; nodes_file="$2"; shift 2 ;;
        --version) need_value "$@"; version="${2#v}"; shift 2 ;;
        --sha256) need_value "$@"; sha256="${2,,}"; shift 2 ;;
        --replace) replace=1; shift ;;
        --dry-run) dry_run=1; shift ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done

# ---------------------------------------------------------------------------------------------
# The arguments.

case "$role" in
    gpu | orchestrator | both) ;;
    *) die "--role must be gpu, orchestrator or both, not '$role'" ;;
esac
gpu_role=0
orch_role=0
[ "$role" = orchestrator ] || gpu_role=1
[ "$role" = gpu ] || orch_role=1

[ -n "$url" ] || die "--url is required: https://github.com/OWNER/REPO or https://github.com/ORG"
url="${url%/}"
url="${url%.git}"
[[ "$url" =~ ^https://[^/[:space:]]+/[^/[:space:]]+(/[^/[:space:]]+)?$ ]] ||
    die "--url '$url' is not https://HOST/OWNER/REPO or https://HOST/ORG"
url_path="${url#https://*/}"
if [[ "$url_path" == */* ]]; then scope="repository"; else scope="organisation"; fi
if [ -n "$group" ] && [ "$scope" = repository ]; then
    die "--group is for an organisation's runner: give the organisation's URL (https://HOST/ORG)"
fi
if [ -z "$token" ] && [ "$dry_run" -eq 0 ]; then
    die "the registration token is required: RUNNER_TOKEN=... or --token (see --help)"
fi
if [ -n "$sha256" ] && ! [[ "$sha256" =~ ^[0-9a-f]{64}$ ]]; then
    die "--sha256 must be 64 hex digits"
fi
if [ -n "$version" ] && ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    die "--version must look like 2.321.0"
fi
plain_name='^[A-Za-z0-9][A-Za-z0-9._-]*$'

# A top-level string key of a TOML file (before its first [table]): `key = "value"`.
toml_top_string() {
    sed -n -e '/^[[:space:]]*\[/q' \
        -e "s/^[[:space:]]*$2[[:space:]]*=[[:space:]]*[\"']\\([^\"']*\\)[\"'].*\$/\\1/p" "$1" |
        head -n 1
}

# ---------------------------------------------------------------------------------------------
# The checks: every one is run, and all that fail are reported together.

failures=0
ok() { printf '  ok    %s\n' "$*"; }
bad() {
    printf '  FAIL  %s\n' "$*"
    failures=$((failures + 1))
}
warn() { printf '  warn  %s\n' "$*"; }

# Whether the runner's user (once it exists) can do `test $1 $2`.
user_can() {
    if id -u "$user" > /dev/null 2>&1 && command -v runuser > /dev/null 2>&1; then
        runuser -u "$user" -- test "$1" "$2"
    else
        test "$1" "$2"
    fi
}

say "checking this machine for a prgate $role runner"

if [ "$dry_run" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
    bad "run as root: it creates a user and installs a service (--dry-run only checks)"
fi
if [ "$(uname -s)" = Linux ]; then ok "Linux"; else bad "not Linux: $(uname -s)"; fi
case "$(uname -m)" in
    x86_64 | amd64) runner_arch="x64"; ok "x86_64" ;;
    aarch64 | arm64) runner_arch="arm64"; ok "aarch64" ;;
    *) runner_arch=""; bad "no actions runner for this machine: $(uname -m)" ;;
esac

for tool in git jq curl tar flock runuser systemctl; do
    if command -v "$tool" > /dev/null 2>&1; then
        ok "$tool"
    else
        bad "$tool is missing (apt-get install git jq curl tar util-linux systemd)"
    fi
done
if command -v git > /dev/null 2>&1; then
    git_version="$(git --version | sed -n 's/^git version \([0-9]*\)\.\([0-9]*\).*/\1 \2/p')"
    read -r git_major git_minor <<< "${git_version:-0 0}"
    # The workflow hands git the token through GIT_CONFIG_COUNT (git 2.31).
    if [ "$git_major" -gt 2 ] || { [ "$git_major" -eq 2 ] && [ "$git_minor" -ge 31 ]; }; then
        ok "git $git_major.$git_minor (2.31 or later)"
    else
        bad "git $git_major.$git_minor is older than 2.31: the workflow's fetch needs GIT_CONFIG_COUNT"
    fi
fi

if [ -x "$prgate" ] && prgate_version="$("$prgate" --version 2> /dev/null)"; then
    ok "$prgate_version ($prgate)"
    if [ "$(stat -c %u "$prgate")" -ne 0 ] || [ -n "$(find "$prgate" -perm /022 -print)" ]; then
        warn "$prgate should be owned by root and writable by nobody else: the runner must not be able to replace it"
    fi
else
    bad "$prgate does not run: install prgate there (docs/workflow.md, 'prgate on the runners') or give --prgate"
fi

# The user: by role, and whether it exists yet.
if [ -z "$user" ]; then
    if [ "$gpu_role" -eq 1 ]; then user="prgate-runner"; else user="prgate-orchestrator"; fi
fi
[[ "$user" =~ ^[a-z_][a-z0-9_-]*$ ]] || bad "--user '$user' is not a plain user name"
if id -u "$user" > /dev/null 2>&1; then
    ok "user $user exists"
    user_exists=1
else
    ok "user $user will be created"
    user_exists=0
fi

engine=""
if [ "$gpu_role" -eq 1 ]; then
    if command -v docker > /dev/null 2>&1; then
        engine="docker"
    elif command -v podman > /dev/null 2>&1; then
        engine="podman"
    fi
    if [ -n "$engine" ]; then
        ok "container engine: $engine ($(command -v "$engine"))"
        if [ "$engine" = docker ] && ! getent group docker > /dev/null; then
            bad "docker has no 'docker' group on this machine: the runner's user could not use it"
        fi
        if ! "$engine" info > /dev/null 2>&1; then
            warn "'$engine info' fails: is the engine's service running?"
        fi
    else
        bad "no container engine: install docker (or podman); prgate runs PR code only in containers"
    fi
    if [ -c /dev/kfd ]; then
        ok "/dev/kfd (the amdgpu driver's compute interface)"
    else
        bad "/dev/kfd is missing: the amdgpu driver is not loaded, or this is not a GPU node"
    fi

    if [ -r "$profile" ]; then
        ok "node profile $profile"
        if [ "$user_exists" -eq 1 ] && ! user_can -r "$profile"; then
            bad "$user cannot read $profile"
        fi
        profile_name="$(toml_top_string "$profile" name)"
        if [ -z "$profile_name" ]; then
            bad "$profile has no top-level name = \"...\""
        elif [ -n "$node" ] && [ "$node" != "$profile_name" ]; then
            bad "--node $node, but $profile is node '$profile_name': the runner label must be the profile's name"
        else
            node="$profile_name"
            ok "node name: $node"
        fi
        store="$(toml_top_string "$profile" checkpoint-store)"
        if [ -n "$store" ] && [ -d "$store" ]; then
            ok "checkpoint store $store"
            if [ "$user_exists" -eq 1 ] && ! user_can -r "$store"; then
                bad "$user cannot read the checkpoint store $store"
            fi
            if [ "$user_exists" -eq 1 ] && user_can -w "$store"; then
                warn "$user can write to the checkpoint store $store: it is mounted read-only into containers, but a job on the host could change it; make it read-only for $user"
            fi
        else
            warn "the checkpoint store '${store:-?}' is not there: models without a checkpoint are recorded no-checkpoint"
        fi
        profile_dirs=()
        for key in work-dir cache-dir; do
            path="$(toml_top_string "$profile" "$key")"
            if [ -z "$path" ]; then
                bad "$profile has no $key"
            elif [ -d "$path" ]; then
                if [ "$user_exists" -eq 1 ] && ! user_can -w "$path"; then
                    bad "$user cannot write to $key $path (chown $user: $path)"
                else
                    ok "$key $path"
                fi
            else
                ok "$key $path will be created for $user"
                profile_dirs+=("$path")
            fi
        done
    else
        bad "the node profile $profile is missing or unreadable (docs/node-profile.md; --profile)"
    fi
    if [ -n "$node" ] && ! [[ "$node" =~ $plain_name ]]; then
        bad "the node's name '$node' is not plain (letters, digits, . _ -)"
    fi
fi

if [ "$orch_role" -eq 1 ]; then
    if [ -r "$nodes_file" ]; then
        ok "nodes file $nodes_file"
        if [ "$user_exists" -eq 1 ] && ! user_can -r "$nodes_file"; then
            bad "$user cannot read $nodes_file"
        fi
    else
        bad "the nodes file $nodes_file is missing or unreadable: the start job schedules on the nodes it lists (--nodes)"
    fi
    if [ "$gpu_role" -eq 0 ] && [ "$user_exists" -eq 1 ] && id -nG "$user" | tr ' ' '\n' | grep -qx docker; then
        warn "$user is in the docker group, which an orchestrator does not need: consider gpasswd -d $user docker"
    fi
fi

# The runner's name, labels and directories.
if [ -z "$name" ]; then
    if [ "$gpu_role" -eq 1 ]; then
        name="$node"
    else
        host="$(uname -n)"
        name="${host%%.*}-prgate-orchestrator"
    fi
fi
if [ -z "$name" ]; then
    bad "no runner name: give --name or --node"
elif ! [[ "$name" =~ $plain_name ]]; then
    bad "the runner name '$name' is not plain (letters, digits, . _ -)"
fi
labels=""
[ "$gpu_role" -eq 0 ] || labels="prgate-gpu,$node"
[ "$orch_role" -eq 0 ] || labels="${labels:+$labels,}prgate-orchestrator"
if [ -n "$extra_labels" ]; then
    [[ "$extra_labels" =~ ^[A-Za-z0-9._-]+(,[A-Za-z0-9._-]+)*$ ]] ||
        bad "--labels '$extra_labels' is not a comma-separated list of plain labels"
    labels="$labels,$extra_labels"
fi
[ -n "$dir" ] || dir="/opt/actions-runner/$name"
[ -n "$work" ] || work="$dir/_work"
case "$dir" in /*) ;; *) bad "--dir must be an absolute path" ;; esac
case "$work" in /*) ;; *) bad "--work must be an absolute path" ;; esac
if [ -e "$dir/.runner" ]; then
    bad "$dir already holds a configured runner; remove it first: cd $dir && ./svc.sh stop && ./svc.sh uninstall && runuser -u $user -- ./config.sh remove --token TOKEN"
fi
if [ -n "$tarball" ] && [ ! -r "$tarball" ]; then
    bad "--tarball $tarball is not readable"
fi

if [ "$failures" -gt 0 ]; then
    die "$failures check(s) failed: nothing was changed"
fi

say "registering '$name' for the $scope $url"
say "  labels: self-hosted (and the OS and architecture's), $labels${group:+; group: $group}"
say "  user: $user; runner in $dir; jobs work in $work"

if [ "$dry_run" -eq 1 ]; then
    say "dry run: every check passed; nothing was changed"
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# The changes, each said as it is done.

done_list=()
did() {
    say "$*"
    done_list+=("$*")
}

if [ "$user_exists" -eq 0 ]; then
    useradd --system --user-group --create-home --home-dir "/var/lib/$user" --shell /bin/bash "$user"
    did "created the system user $user (home /var/lib/$user)"
fi
if [ "$gpu_role" -eq 1 ]; then
    if [ "$engine" = docker ]; then
        if ! id -nG "$user" | tr ' ' '\n' | grep -qx docker; then
            usermod -aG docker "$user"
            did "added $user to the docker group: root-equivalent on this host (see --help)"
        fi
    else
        for gpu_group in video render; do
            if getent group "$gpu_group" > /dev/null && ! id -nG "$user" | tr ' ' '\n' | grep -qx "$gpu_group"; then
                usermod -aG "$gpu_group" "$user"
                did "added $user to the $gpu_group group (the GPUs' device nodes, for rootless podman)"
            fi
        done
        if ! grep -q "^$user:" /etc/subuid 2> /dev/null; then
            say "warning: $user has no range in /etc/subuid: rootless podman needs one (usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $user)"
        fi
    fi
    for path in "${profile_dirs[@]}"; do
        install -d -o "$user" -g "$user" -m 0750 "$path"
        did "created $path for $user"
    done
fi

if [ -n "$tarball" ]; then
    archive="$tarball"
    if [ -n "$sha256" ]; then
        echo "$sha256  $archive" | sha256sum --check --status || die "$archive does not have SHA-256 $sha256"
        did "checked $archive against SHA-256 $sha256"
    else
        say "warning: $archive is not checked (no --sha256)"
    fi
else
    api="https://api.github.com/repos/actions/runner/releases"
    if [ -n "$version" ]; then
        release="$(curl -fsSL "$api/tags/v$version")" || die "cannot read the actions runner release v$version"
    else
        release="$(curl -fsSL "$api/latest")" || die "cannot read the latest actions runner release"
        version="$(jq -r '.tag_name' <<< "$release")"
        version="${version#v}"
    fi
    asset="actions-runner-linux-$runner_arch-$version.tar.gz"
    if [ -z "$sha256" ]; then
        # The release notes carry each package's checksum between these markers.
        sha256="$(jq -r '.body' <<< "$release" |
            grep -o "BEGIN SHA linux-$runner_arch -->[0-9a-f]\{64\}" | grep -o '[0-9a-f]\{64\}' | head -n 1 || true)"
        [ -n "$sha256" ] || die "the release v$version publishes no SHA-256 for linux-$runner_arch: give --sha256"
    fi
    archive="$(mktemp --suffix=.tar.gz)"
    trap 'rm -f "$archive"' EXIT
    curl -fsSL -o "$archive" "https://github.com/actions/runner/releases/download/v$version/$asset"
    echo "$sha256  $archive" | sha256sum --check --status || die "$asset does not have the published SHA-256 $sha256"
    did "downloaded $asset (SHA-256 $sha256, as published)"
fi
install -d -o "$user" -g "$user" -m 0750 "$dir"
tar -xzf "$archive" -C "$dir"
chown -R "$user:$user" "$dir"
did "unpacked the runner into $dir"

if [ -x "$dir/bin/installdependencies.sh" ] && ! ldconfig -p | grep -q libicu; then
    "$dir/bin/installdependencies.sh"
    did "installed the runner's libraries (bin/installdependencies.sh)"
fi

if [ "$work" != "$dir/_work" ]; then
    install -d -o "$user" -g "$user" -m 0750 "$work"
fi

# config.sh runs as the user (it refuses root). The token goes through the environment
# (ACTIONS_RUNNER_INPUT_TOKEN, which config.sh reads), which only root and the user can read,
# not on a command line. The runner records the PATH it is configured with (.path): a plain
# one, with prgate's folder first.
config_args=(--unattended --url "$url" --name "$name" --labels "$labels" --work "$work")
[ -z "$group" ] || config_args+=(--runnergroup "$group")
[ "$replace" -eq 0 ] || config_args+=(--replace)
(
    cd "$dir"
    export ACTIONS_RUNNER_INPUT_TOKEN="$token"
    PATH="$(dirname "$prgate"):/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    export PATH
    runuser -u "$user" -- ./config.sh "${config_args[@]}"
)
did "registered the runner '$name' with labels $labels${group:+ in the group $group}"

(
    cd "$dir"
    ./svc.sh install "$user"
    ./svc.sh start
)
did "installed and started the service (svc.sh install $user; svc.sh status in $dir)"

echo
say "done:"
for line in "${done_list[@]}"; do
    printf '  - %s\n' "$line"
done
if [ "$gpu_role" -eq 1 ] && [ "$engine" = docker ]; then
    echo
    say "note: $user is in the docker group, which is root on this host: this runner must serve"
    say "      only prgate's workflow, which runs PR code in containers only (docs/container.md)."
fi
