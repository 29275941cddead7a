#!/usr/bin/env bash
# hack/test.sh PACKAGE...: make test's run. go test runs the packages PACKAGE... names, then every
# other package of the module, in that order (go list drops the repeats; make/test.mk says why the
# order matters), all but the e2e suite test/e2e/local, which runs as a go test of its own: beside the
# packages when E2E_BESIDE=1, its output kept aside in $E2E_LOG and printed after theirs, whole; after
# them otherwise. Fails when either fails.
set -euo pipefail
: "${E2E_LOG:?}" "${E2E_BESIDE:?}"
go=${GO:-go}
cd "$(dirname "${BASH_SOURCE[0]}")/.."

flags=(-count=1 -vet=off "-ldflags=${TEST_LDFLAGS:-}")
pkgs=$("$go" list "$@" ./... | grep -v '/test/e2e/local$')
e2e() {
	echo "+ $go test ${flags[*]} -timeout 20m ./test/e2e/local/ >$E2E_LOG"
	"$go" test "${flags[@]}" -timeout 20m ./test/e2e/local/ >"$E2E_LOG" 2>&1
}

if [[ $E2E_BESIDE == 1 ]]; then
	e2e &
	e2e_pid=$!
fi
rc=0
echo "+ $go test ${flags[*]} -timeout 30m <the $(wc -l <<<"$pkgs") packages of go list $* ./... but test/e2e/local>"
# shellcheck disable=SC2086 # one argument a package
"$go" test "${flags[@]}" -timeout 30m $pkgs || rc=$?
e2e_rc=0
if [[ $E2E_BESIDE == 1 ]]; then
	wait "$e2e_pid" || e2e_rc=$?
	echo "# test/e2e/local, run beside the packages above:"
else
	e2e || e2e_rc=$?
	echo "# test/e2e/local, run after the packages above:"
fi
cat "$E2E_LOG"
[[ $rc == 0 && $e2e_rc == 0 ]]
