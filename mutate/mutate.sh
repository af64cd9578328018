#!/usr/bin/env bash
# Mutation testing of the pure decision packages with gremlins.
#
# For each package in PACKAGES, gremlins mutates its non-test files and runs the
# package's own unit tests against every covered mutant. A mutant that the
# tests do not notice "lives"; it must either get a test or a line in
# mutate/equivalent.txt saying why no test can tell it apart (an equivalent
# mutant). The run fails when a package kills less than MIN_EFFICACY percent of
# its covered, non-equivalent mutants, or when a mutant lives that is not listed.
#
# Three things make gremlins fit this workspace:
#   - gremlins tests each mutant in a copy of the module made under TMPDIR,
#     where go.work and the relative replace directives do not reach. Every
#     run therefore uses GOWORK=off and an alternate go.mod (-modfile) whose
#     replace directives name the sibling modules by absolute path.
#   - gremlins gathers coverage over <package>/..., and some subpackages
#     (the stores) need PostgreSQL. -run restricts every test run to the tests
#     of the package itself, and -E keeps subpackage files out of the mutants.
#   - the JSON report is checked here, with the equivalent list applied.
#
# Usage: mutate/mutate.sh [module:dir ...]   (default: every package below)
# Env:   GREMLINS (binary), WORKERS (2), MIN_EFFICACY (90), TIMEOUT_COEFFICIENT (6)
#
# gremlins times a mutant out after TIMEOUT_COEFFICIENT times the coverage
# run; -count=1 keeps that run out of the test cache, whose near-zero time
# would time out every mutant.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
GREMLINS=${GREMLINS:-gremlins}
case $GREMLINS in */*) GREMLINS=$(cd "$(dirname "$GREMLINS")" && pwd)/$(basename "$GREMLINS") ;; esac
WORKERS=${WORKERS:-2}
MIN_EFFICACY=${MIN_EFFICACY:-90}
TIMEOUT_COEFFICIENT=${TIMEOUT_COEFFICIENT:-6}
equivalent=$root/mutate/equivalent.txt

# module:directory inside the module
PACKAGES=(
	services:reconciler
	services:payment
	services:payment/paymentprovider
	services:order
	services:order/apikey
	services:inventory
	services:shipping
	services:funding
	schemas:compat
	consumers:replay
)
[ $# -gt 0 ] && PACKAGES=("$@")

modules=(infra schemas relay consumers services examples)
tmp=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"' EXIT

summary=$tmp/summary
failed=0
printf '%-34s %9s %7s %6s %12s %9s %10s %11s\n' package efficacy killed lived equivalent timed-out not-viable not-covered >"$summary"

for spec in "${PACKAGES[@]}"; do
	mod=${spec%%:*}
	dir=${spec#*:}
	pkg=$mod/$dir
	name=${pkg//\//_}

	# The alternate go.mod: the module's own, with absolute replaces.
	modfile=$tmp/$name.mod
	cp "$root/$mod/go.mod" "$modfile"
	cat "$root/$mod/go.sum" "$root/go.work.sum" >"$tmp/$name.sum"
	for m in "${modules[@]}"; do
		[ "$m" = "$mod" ] && continue
		(cd "$root/$mod" && go mod edit -modfile="$modfile" -replace="github.com/concordhq/concord/$m=$root/$m")
	done

	# The package's own tests, top-level names only.
	tests=$(cd "$root/$mod" && go test -list . "./$dir" | grep -E '^(Test|Example)' | paste -sd'|' -)
	if [ -z "$tests" ]; then
		echo "$pkg: no tests" >&2
		failed=1
		continue
	fi

	work=$tmp/$name.d
	mkdir -p "$work"
	echo "== $pkg"
	(cd "$root/$mod" &&
		TMPDIR=$work GOWORK=off GOFLAGS="-count=1 -mod=mod -modfile=$modfile -run=^($tests)\$" \
			"$GREMLINS" unleash --silent --workers "$WORKERS" \
			--timeout-coefficient "$TIMEOUT_COEFFICIENT" \
			--exclude-files "/" \
			--output "$tmp/$name.json" "./$dir") || {
		echo "$pkg: gremlins failed" >&2
		failed=1
		continue
	}

	echo "$pkg" >>"$tmp/ran"
	# Lived mutants as file:line:column TYPE, and whether each is listed.
	jq -r '.files[] | .file_name as $f | .mutations[] | select(.status == "LIVED") | "\($f):\(.line):\(.column) \(.type)"' \
		"$tmp/$name.json" | sort >"$tmp/$name.lived"
	jq -r '.files[] | .file_name as $f | .mutations[] | select(.status == "TIMED OUT") | "\($f):\(.line):\(.column) \(.type)"' \
		"$tmp/$name.json" | sort >"$tmp/$name.timedout"
	sed "s|^|  timed out: $pkg/|" "$tmp/$name.timedout"
	eq=0
	while read -r where type; do
		[ -z "$where" ] && continue
		if grep -qE "^$pkg/${where//./\\.} $type( |$)" "$equivalent" 2>/dev/null; then
			eq=$((eq + 1))
			echo "$pkg/$where $type" >>"$tmp/matched"
		else
			echo "  lived, not listed as equivalent: $pkg/$where $type"
		fi
	done <"$tmp/$name.lived"

	read -r killed lived notviable notcovered < <(jq -r '"\(.mutants_killed) \(.mutants_lived) \(.mutants_not_viable) \(.mutants_not_covered)"' "$tmp/$name.json")
	timedout=$(wc -l <"$tmp/$name.timedout")
	# Efficacy as gremlins defines it, killed / (killed + lived), with the
	# listed mutants left out of lived. Timed out mutants count in neither.
	counted=$((killed + lived - eq))
	if [ "$counted" -eq 0 ]; then
		efficacy=100
	else
		efficacy=$(awk -v k="$killed" -v c=$counted 'BEGIN { printf "%.1f", 100 * k / c }')
	fi
	printf '%-34s %8s%% %7d %6d %12d %9d %10d %11d\n' "$pkg" "$efficacy" "$killed" "$((lived - eq))" "$eq" "$timedout" "$notviable" "$notcovered" >>"$summary"
	if awk -v e="$efficacy" -v m="$MIN_EFFICACY" 'BEGIN { exit !(e < m) }'; then
		echo "$pkg: efficacy $efficacy% is below $MIN_EFFICACY%" >&2
		failed=1
	fi
	if [ "$lived" -gt "$eq" ]; then
		failed=1
	fi
done

# Entries of the packages run that name no lived mutant any more.
touch "$tmp/matched" "$tmp/ran"
while read -r pkg; do
	{ grep -E "^$pkg/[^/]+\.go:" "$equivalent" || true; } | cut -d' ' -f1-2 | while read -r entry; do
		grep -qxF "$entry" "$tmp/matched" || echo "  stale in mutate/equivalent.txt (no such lived mutant): $entry"
	done
done <"$tmp/ran"

echo
cat "$summary"
if [ "$failed" -ne 0 ]; then
	echo "mutate: failed (a lived mutant needs a test, or a line in mutate/equivalent.txt with the reason)" >&2
	exit 1
fi
