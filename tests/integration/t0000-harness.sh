#!/usr/bin/env bash
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
	(sleep 0.3 && touch flag) &
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
	grep -x "# nested: 2 passed, 3 failed" nested.out &&
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

test_expect_success 'an all-passing file exits 0' '
	TEST_NAME=nested2 bash -c "
		. \"\$FLEET_ROOT/tests/lib.sh\"
		test_expect_success one true
		test_done
	" >out 2>&1 &&
	grep -x "# nested2: 1 passed, 0 failed" out
'

test_done
