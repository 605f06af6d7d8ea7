from rollout.cli import main

# Guarded: `fleet advance` starts its `up` workers with multiprocessing's spawn, which imports this module again
# (as __mp_main__) in each worker; the command line must run only in the process the user started.
if __name__ == "__main__":
    main()
