#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The harness itself and the shared broker: a message goes through a vhost of
# our own and comes back; a failing snippet is reported as failing.
. "$(dirname "$0")/../lib.sh"

broker_use_shared
new_vhost t0000 || { echo "# cannot create vhost t0000" >&2; exit 1; }

test_expect_success 'the broker env is loaded inside snippets' '
	test -n "$FLEET_BROKER_URI" &&
	test -n "$BROKER_NODE" &&
	test "$(broker_uri t0000)" = "amqp://guest:guest@127.0.0.1:$BROKER_PORT/t0000" &&
	test "$(broker_uri /)" = "amqp://guest:guest@127.0.0.1:$BROKER_PORT/%2F"
'

test_expect_success 'a message published to a vhost of our own comes back' '
	uri=$(broker_uri t0000) &&
	amqp-declare-queue -u "$uri" -d -q harness >/dev/null &&
	amqp-publish -u "$uri" -r harness -p -b "hello from t0000 $$" &&
	amqp-get -u "$uri" -q harness >got &&
	printf "%s" "hello from t0000 $$" >expect &&
	test_cmp expect got
'

test_expect_success 'the queue is in that vhost only, and now empty' '
	rmqctl list_queues -q -p t0000 name messages >queues &&
	printf "name\tmessages\nharness\t0\n" >expect &&
	test_cmp expect queues &&
	! rmqctl list_queues -q -p / name | grep -qx harness
'

test_expect_success 'wait_for succeeds when the condition comes true, fails on timeout' '
	{ (sleep 0.3 && touch flag) & } &&
	wait_for 5 "test -e flag" &&
	test_must_fail wait_for 0.3 "test -e no-such-file"
'

# A nested harness run: its own TEST_DIR, its own results.
nested() {
	TEST_NAME=nested bash -c '
		. "$FLEET_ROOT/tests/lib.sh"
		echo "dir=$TEST_DIR"
		at_exit "echo cleanup-first"
		test_expect_success "this passes" "true"
		test_expect_success "this fails in the middle of a chain" "true && false && true"
		test_expect_success "a failing command shows its output" "echo visible-output && test 1 = 2"
		test_expect_success "registered inside a snippet" "at_exit \"echo cleanup-second\""
		test_expect_success "exit in a snippet ends only the snippet" "exit 3"
		test_done
	' >nested.out 2>&1
	echo "rc=$?" >>nested.out
}

test_expect_success 'a failing snippet is reported as failing' '
	nested &&
	grep -x "ok 1 - this passes ([0-9.]* s)" nested.out &&
	grep "^not ok 2 - this fails in the middle of a chain" nested.out &&
	grep "^not ok 3 - a failing command shows its output" nested.out &&
	grep "^#     visible-output$" nested.out &&
	grep "^ok 4 - registered inside a snippet" nested.out &&
	grep "^not ok 5 - exit in a snippet ends only the snippet (.*exit 3)" nested.out &&
	grep -x "# nested: 2 passed, 3 failed, 0 skipped" nested.out &&
	grep -x "rc=1" nested.out
'

test_expect_success 'cleanups run in reverse order and the temp dir is removed' '
	sed -n "s/^cleanup-//p" nested.out >order &&
	printf "second\nfirst\n" >expect &&
	test_cmp expect order &&
	dir=$(sed -n "s/^dir=//p" nested.out) &&
	test -n "$dir" &&
	! test -e "$dir"
'

# Chain-lint: a snippet whose && chain is broken fails even when its last
# command succeeds (without the lint the "false" would be lost silently).
test_expect_success 'chain-lint: a broken &&-chain fails the test' '
	test_must_fail env TEST_NAME=nested3 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_expect_success \"broken by a newline\" \"false
			true\"
		test_expect_success \"broken by a semicolon\" \"false; true\"
		test_expect_success \"broken by a background job\" \"sleep 0 &
			true\"
		test_expect_success \"whole chains pass\" \"true &&
			{ sleep 0 & } &&
			if false; then false; fi &&
			for i in 1 2; do true; done\"
		test_done
	" >out3 2>&1 &&
	grep "^not ok 1 - broken by a newline (.*exit 117)" out3 &&
	grep -q "chain-lint: broken &&-chain" out3 &&
	grep "^not ok 2 - broken by a semicolon" out3 &&
	grep "^not ok 3 - broken by a background job" out3 &&
	grep "^ok 4 - whole chains pass" out3 &&
	grep -x "# nested3: 1 passed, 3 failed, 0 skipped" out3
'

test_expect_success 'test_absent: needs its marker, then fails if the event happened' '
	touch marker &&
	test_absent 1 "test -e marker" "test -e event" &&
	test_must_fail test_absent 0.3 "test -e no-marker" "test -e event" 2>err &&
	grep -q "the marker never came" err &&
	touch event &&
	test_must_fail test_absent 1 "test -e marker" "test -e event" 2>err &&
	grep -q "it happened" err
'

test_expect_success 'an all-passing file exits 0' '
	TEST_NAME=nested2 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_expect_success one true
		test_done
	" >out 2>&1 &&
	grep -x "# nested2: 1 passed, 0 failed, 0 skipped" out
'

test_expect_success 'a skip is counted as skipped; unplanned under FLEET_NO_SKIP=1 it fails' '
	FLEET_NO_SKIP=0 TEST_NAME=nested4 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_skip_all no such tool here
	" >out 2>&1 &&
	grep -x "# SKIP nested4: no such tool here" out &&
	grep -x "# nested4: 0 passed, 0 failed, 1 skipped" out &&
	test_must_fail env FLEET_NO_SKIP=1 TEST_NAME=nested5 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_skip_all no such tool here
	" >out 2>&1 &&
	grep -q "^# FAIL nested5: would skip, but FLEET_NO_SKIP=1" out &&
	grep -x "# nested5: 0 passed, 1 failed, 0 skipped" out &&
	FLEET_NO_SKIP=1 TEST_NAME=nested6 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_skip_all --planned not for this build
	" >out 2>&1 &&
	grep -x "# nested6: 0 passed, 0 failed, 1 skipped" out
'

test_expect_success 'test_skip_planned: one test not run, with its reason, counted as skipped, never a failure' '
	FLEET_NO_SKIP=1 TEST_NAME=nested7 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_expect_success one true
		test_skip_planned \"two\" \"needs systemd as init\"
		test_expect_success three true
		test_done
	" >out 2>&1 &&
	cat out &&
	grep -x "ok 2 - two # SKIP (planned): needs systemd as init" out &&
	grep -x "# SKIP nested7: two: needs systemd as init" out &&
	grep -q "^ok 3 - three" out &&
	grep -x "# nested7: 2 passed, 0 failed, 1 skipped" out
'

test_expect_success 'test_expect_failure: a known breakage counts as skipped; once it passes it fails the file' '
	FLEET_NO_SKIP=1 TEST_NAME=nested8 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_expect_failure \"still broken\" false
		test_expect_success two true
		test_done
	" >out 2>&1 &&
	cat out &&
	grep -x "not ok 1 - still broken # TODO known breakage (.*)" out &&
	grep -x "# SKIP nested8: still broken: known breakage" out &&
	grep -x "# nested8: 1 passed, 0 failed, 1 skipped" out &&
	test_must_fail env TEST_NAME=nested9 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_expect_failure mended true
		test_done
	" >out 2>&1 &&
	cat out &&
	grep -q "^not ok 1 - mended # TODO known breakage vanished: it passes now; make it a test_expect_success" out &&
	grep -x "# nested9: 0 passed, 1 failed, 0 skipped" out &&
	test_must_fail env TEST_NAME=nested10 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_expect_failure unchained \"false
		true\"
		test_done
	" >out 2>&1 &&
	grep -x "# nested10: 0 passed, 1 failed, 0 skipped" out
'

test_expect_success 'a failing test shows the last lines of the logs registered with test_log_on_failure' '
	test_must_fail env TEST_NAME=nested11 TEST_LOG_LINES=2 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		printf \"%s\\n\" early middle late1 late2 >\"\$TEST_DIR/d.log\"
		test_log_on_failure \"\$TEST_DIR/d.log\"
		test_log_on_failure \"\$TEST_DIR/d.log\"
		test_log_on_failure \"\$TEST_DIR/never.log\"
		test_expect_success passes true
		test_expect_success fails false
		test_done
	" >out 2>&1 &&
	cat out &&
	grep -x "#   d.log, its last 2 lines:" out >shown &&
	test $(wc -l <shown) = 1 &&
	grep -x "#     late1" out && grep -x "#     late2" out &&
	! grep -q middle out && ! grep -q never.log out &&
	test "$(sed -n "/^not ok 2/,\$p" out | grep -c "d.log")" = 1
'

test_expect_success 'test_eq: equal passes silently; different fails and says what, got and want' '
	test_eq same 3 3 2>err && test ! -s err &&
	test_must_fail test_eq "dead letters" 4 3 2>err &&
	grep -qx "test_eq: dead letters: got '\''4'\'', want '\''3'\''" err &&
	test_must_fail test_eq empty "" 0 2>/dev/null
'

test_done
