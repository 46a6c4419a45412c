from lychgate.cli import main

main()
