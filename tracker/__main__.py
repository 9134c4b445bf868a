from tracker.surfaces.entry import run

run()
