from rollout.cli import main

main()
