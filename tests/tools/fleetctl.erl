%% SPDX-License-Identifier: Apache-2.0
%% fleetctl: the test harness's fast path to one RabbitMQ node.
%%
%% Every `rabbitmqctl` boots an Erlang VM and loads the CLI: about 1.4 s
%% of CPU per call on the test machine, most of the CPU of some test
%% files. This hidden node connects once to the broker node and answers
%% the harness's two most frequent questions over a loopback TCP port:
%%
%%   queues VHOST COLUMN...
%%                     each queue of VHOST as `rabbitmqctl list_queues -q
%%                     COLUMN...` prints it, header line included; columns:
%%                     name, messages (ready + unacknowledged),
%%                     messages_ready, messages_unacknowledged, consumers;
%%                     a queue whose process does not answer within 5 s
%%                     has its name and "unanswered" for its counts
%%   eval              the Erlang expressions on the lines that follow,
%%                     evaluated on the broker node, the value printed with
%%                     ~p (as `rabbitmqctl eval` does)
%%
%% A request is its lines, then a line "%%END". The answer is a first line
%% "rc=0" or "rc=1" (then why), then the output; the connection closes.
%% It exits when the broker node goes down (its port file removed).
%% tests/lib.sh (rmqctl) starts it on first use and falls back to
%% rabbitmqctl when it is not there.
%%
%%   erl -noshell -hidden -sname NAME -s fleetctl main BROKER_NODE PORT_FILE
-module(fleetctl).
-export([main/1]).

-define(CALL_MS, 60000).
-define(QUEUE_MS, 5000).

main([Node, PortFileA]) ->
    PortFile = atom_to_list(PortFileA),
    case net_kernel:connect_node(Node) of
        true -> ok;
        _ -> halt(3)
    end,
    erlang:monitor_node(Node, true),
    {ok, L} = gen_tcp:listen(0, [binary, {ip, {127, 0, 0, 1}}, {packet, raw},
                                 {active, false}, {reuseaddr, true}]),
    {ok, Port} = inet:port(L),
    Tmp = PortFile ++ ".tmp",
    ok = file:write_file(Tmp, integer_to_list(Port)),
    ok = file:rename(Tmp, PortFile),
    spawn_link(fun() -> accept(L, Node) end),
    receive
        {nodedown, Node} ->
            file:delete(PortFile),
            halt(0)
    end.

accept(L, Node) ->
    {ok, S} = gen_tcp:accept(L),
    Pid = spawn(fun() -> receive go -> serve(S, Node) end end),
    ok = gen_tcp:controlling_process(S, Pid),
    Pid ! go,
    accept(L, Node).

serve(S, Node) ->
    case read_request(S, <<>>) of
        {ok, Req} ->
            {Rc, Out} = try answer(Req, Node)
                        catch C:E -> {1, io_lib:format("fleetctl: ~p:~p~n", [C, E])}
                        end,
            gen_tcp:send(S, [io_lib:format("rc=~b~n", [Rc]), Out]);
        error ->
            ok
    end,
    gen_tcp:close(S).

read_request(S, Acc) ->
    case binary:match(Acc, <<"\n%%END\n">>) of
        {At, _} ->
            {ok, binary_to_list(binary:part(Acc, 0, At))};
        nomatch ->
            case gen_tcp:recv(S, 0, ?CALL_MS) of
                {ok, More} -> read_request(S, <<Acc/binary, More/binary>>);
                _ -> error
            end
    end.

column(C) ->
    lists:member(C, ["name", "messages", "messages_ready", "messages_unacknowledged",
                     "consumers"]).

answer(Req, Node) ->
    {Cmd, Rest} = case string:split(Req, "\n") of
                      [C] -> {C, ""};
                      [C, R] -> {C, R}
                  end,
    case string:split(Cmd, " ") of
        ["queues", Args] ->
            [VHost | Cols] = string:lexemes(Args, " "),
            true = lists:all(fun column/1, Cols),
            queues(Node, list_to_binary(VHost), Cols);
        ["eval"] -> eval(Node, Rest);
        _ -> {1, io_lib:format("fleetctl: unknown request ~p~n", [Cmd])}
    end.

queues(Node, VHost, Cols) ->
    Keys = [list_to_atom(C) || C <- Cols],
    case rpc:call(Node, rabbit_amqqueue, list, [VHost], ?CALL_MS) of
        {badrpc, Why} ->
            {1, io_lib:format("fleetctl: list of queues failed: ~p~n", [Why])};
        Qs when is_list(Qs) ->
            {0, [lists:join($\t, Cols), $\n | [queue_line(Node, Keys, Q) || Q <- Qs]]}
    end.

%% One queue's line.  Its counts come from its own process: one that does
%% not answer within ?QUEUE_MS (suspended, a quorum queue without a
%% leader) is listed with its name and "unanswered" for its counts, where
%% rabbitmqctl would wait for it (broker_count then fails: never a count).
queue_line(Node, Keys, Q) ->
    case rpc:call(Node, rabbit_amqqueue, info, [Q, Keys], ?QUEUE_MS) of
        Info when is_list(Info) ->
            line(Keys, Info);
        _ ->
            Name = rpc:call(Node, amqqueue, get_name, [Q], ?CALL_MS),
            line(Keys, [{name, Name} | [{K, unanswered} || K <- Keys, K =/= name]])
    end.

line(Keys, Info) ->
    [lists:join($\t, [value(proplists:get_value(K, Info)) || K <- Keys]), $\n].

value({resource, _, queue, Name}) -> Name;
value(N) when is_integer(N) -> integer_to_list(N);
value(unanswered) -> "unanswered";
value(_) -> "".

eval(Node, Text) ->
    {ok, Toks, _} = erl_scan:string(Text),
    {ok, Exprs} = erl_parse:parse_exprs(Toks),
    case rpc:call(Node, erl_eval, exprs, [Exprs, []], ?CALL_MS) of
        {badrpc, Why} ->
            {1, io_lib:format("fleetctl: eval failed: ~p~n", [Why])};
        {value, V, _} ->
            {0, io_lib:format("~p~n", [V])}
    end.
