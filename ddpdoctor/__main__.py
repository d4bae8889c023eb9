"""`python -m ddpdoctor` is the same as the `ddpdoctor` command."""

from ddpdoctor.cli import main

if __name__ == "__main__":
    main()
