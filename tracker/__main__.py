from tracker.surfaces.cli import main

main()
