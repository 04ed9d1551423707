/*
 * The sleep/wake protocol of the dynamic offloading mode
 * (rv_offload_queue.h, rv_offload_exec.c), in Promela, for SPIN.
 *
 * R requesters enqueue M commands each into one executor's queue of SIZE
 * slots; the executor posts them, each becomes an outstanding operation
 * that the network completes and the executor (its own completer) reaps.
 * With -DCOMPLETER a completer process reaps them instead
 * (progress.completers: threads): the executor signals it after posting,
 * on a wake word of its own, and it sleeps when nothing is outstanding.
 * The labels name the steps that rv_offload_queue.h and rv_offload_exec.c
 * mark with "model: <step>".
 *
 * Checked: no lost wake-up (when nothing can move any more, every command
 * was posted and completed: the monitor's assertion) and no deadlock (no
 * process blocked outside an end state), for every interleaving.
 * Build with -DLOST_WAKEUP for the protocol without the futex's compare
 * (the executor sleeps unconditionally once it cleared its bit), or with
 * -DCOMPLETER -DLOST_CWAKEUP for the completer's: SPIN must then find the
 * lost wake-up, which shows the check can fail.
 */
#ifndef R
#define R 2
#endif
#define M 2
#define SIZE 2
#define TOTAL (R * M)

byte count = 0;      /* the tail's count: commands reserved */
bit awake = 1;       /* the tail's bit: the executor is awake */
byte head = 0;       /* commands the executor took */
bit filled[TOTAL];   /* a reserved command is written */
bit sleeping = 0;    /* the executor waits on the futex */
byte outstanding = 0;/* posted, not yet reaped */
byte ready = 0;      /* completions the network has for the executor */
byte posted = 0;
byte completed = 0;
byte cposts = 0;     /* the completer's word: the executor's posts */
bit cawake = 1;      /* ...and its bit: the completer is awake */
bit csleeping = 0;   /* the completer waits on the futex */

proctype requester()
{
    byte i = 0, mine;
    bit old;
    do
    :: i < M ->
        /* reserve: CAS [count, b] -> [count + 1, 1], when not full; a
         * full queue makes the requester retry (it yields meanwhile) */
        atomic {
            (count - head < SIZE) ->
            mine = count; old = awake; count++; awake = 1
        };
        /* fill: the command's sequence is stored, with release */
        filled[mine] = 1;
        /* wake: only when the bit replaced said the executor slept; a
         * futex wake with no waiter does nothing */
        if
        :: old == 0 -> sleeping = 0
        :: else -> skip
        fi;
        i++
    :: else -> break
    od
}

active proctype executor()
{
    byte t_count;
    bit t_awake;
loop:
    if
    :: head < TOTAL && filled[head] ->
        /* take and post */
        posted++; outstanding++; head++;
#ifdef COMPLETER
        /* signal: CAS [cposts, b] -> [cposts + 1, 1]; wake the completer
         * when the bit replaced was 0 */
        atomic {
            if
            :: cawake == 0 -> csleeping = 0
            :: else -> skip
            fi;
            cposts++; cawake = 1
        };
#endif
        goto loop
#ifndef COMPLETER
    :: ready > 0 ->
        /* complete: the executor reaps a completion */
        atomic { ready--; outstanding--; completed++ };
        goto loop
#endif
    :: else -> skip
    fi;
#ifndef COMPLETER
    /* A completer sleeps only when nothing is outstanding. */
    if
    :: outstanding > 0 -> goto loop
    :: else -> skip
    fi;
#endif
    /* check: a reserved command, even one not filled yet, keeps it awake */
    atomic { t_count = count; t_awake = awake };
    if
    :: t_count != head -> goto loop
    :: else -> skip
    fi;
    /* clear: CAS [count, 1] -> [count, 0]; a failed CAS goes round again */
    if
    :: t_awake == 1 ->
        atomic {
            if
            :: count == t_count && awake == 1 -> awake = 0
            :: else -> goto loop
            fi
        }
    :: else -> skip
    fi;
    /* sleep: FUTEX_WAIT sleeps only while the tail is what it cleared */
    atomic {
#ifdef LOST_WAKEUP
        sleeping = 1
#else
        if
        :: count == t_count && awake == 0 -> sleeping = 1
        :: else -> goto loop
        fi
#endif
    };
end_sleep:
    (sleeping == 0);
    goto loop
}

#ifdef COMPLETER
/* rv_offload_exec.c: completer_main. */
active proctype completer()
{
    byte seen_count;
    bit seen_awake;
loop:
    /* the word is read before polling */
    atomic { seen_count = cposts; seen_awake = cawake };
    if
    :: ready > 0 ->
        /* complete */
        atomic { ready--; outstanding--; completed++ };
        goto loop
    :: else -> skip
    fi;
    /* check: it sleeps only when nothing is outstanding */
    if
    :: outstanding > 0 -> goto loop
    :: else -> skip
    fi;
    /* clear: CAS [seen, 1] -> [seen, 0]; a failed CAS goes round again */
    if
    :: seen_awake == 1 ->
        atomic {
            if
            :: cposts == seen_count && cawake == 1 -> cawake = 0
            :: else -> goto loop
            fi
        }
    :: else -> skip
    fi;
    /* sleep: only while the word is still [seen, 0] */
    atomic {
#ifdef LOST_CWAKEUP
        csleeping = 1
#else
        if
        :: cposts == seen_count && cawake == 0 -> csleeping = 1
        :: else -> goto loop
        fi
#endif
    };
end_sleep:
    (csleeping == 0);
    goto loop
}
#endif

/* The network completes what was posted, in its own time. */
active proctype network()
{
end_idle:
    do
    :: atomic { outstanding > ready -> ready++ }
    od
}

/* When no process can move, every command was posted and completed. */
active proctype monitor()
{
end_done:
    timeout ->
    assert(posted == TOTAL && completed == TOTAL && head == TOTAL)
}

init
{
    byte i = 0;
    atomic {
        do
        :: i < R -> run requester(); i++
        :: else -> break
        od
    }
}
