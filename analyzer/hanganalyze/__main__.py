from hanganalyze.cli import main

main()
