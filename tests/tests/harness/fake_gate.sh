#!/bin/sh
# A stand-in for `fleetgate-proxy` in the harness self-tests. FAKE_GATE_MODE picks a behaviour:
#   listen (default)  serve: log to stderr, print the listening line, log again later, stay up
#   no-admin          serve: a listening line without the admin listener
#   garbage           serve: a first stdout line that is not JSON
#   exit              serve: complain on stderr and exit 64 before listening
#   silent            serve: print nothing and stay up
#   cli               any subcommand: echo the arguments, exit 3
mode=${FAKE_GATE_MODE:-listen}
if [ "$mode" = cli ]; then
  echo "cli: $*"
  echo "cli stderr" >&2
  exit 3
fi
echo "argv: $*" >&2
case "$mode" in
  listen)
    echo '{"event":"starting","verdict":"none"}' >&2
    echo '{"listening":{"api":"127.0.0.1:4101","admin":"127.0.0.1:4102","proxy":"[::1]:4103"}}'
    echo "after listening"
    sleep 0.3
    echo '{"event":"egress.decision","verdict":"deny","reason":"ip_private_range"}' >&2
    exec sleep 30
    ;;
  no-admin)
    echo '{"listening":{"api":"127.0.0.1:4101"}}'
    exec sleep 30
    ;;
  garbage)
    echo 'hello, not json'
    exec sleep 30
    ;;
  exit)
    echo "failed to load policy: missing version" >&2
    exit 64
    ;;
  silent)
    exec sleep 30
    ;;
esac
